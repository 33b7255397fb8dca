"""Repository-level pytest defaults.

The plugin itself is loaded through its `pytest11` entry point; nothing here is needed to use it.
Task runs (`pytest --agentbench-suite custom-dev`) read `taskpacks/` and write `reports/runs/`
relative to this directory.
"""
