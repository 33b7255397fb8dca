"""Helpers shared by the test tiers; no tests here.

- `sandboxes`: the one Docker sandbox factory of a test session and the labels that find leftovers.
- `plugin_runs`: `python -m pytest` runs of the plugin on the bundled taskpacks and their results.
- `synthetic`: synthetic run directories (valid records) for report tests, benchmarks and demos.
"""
