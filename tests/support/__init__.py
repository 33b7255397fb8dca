"""Helpers shared by the test tiers; no tests here.

- `sandboxes`: the one Docker sandbox factory of a test session and the labels that find leftovers.
- `plugin_runs`: `python -m pytest` runs of the plugin on the bundled taskpacks and their results.
- `tiny_pack`: a tiny taskpack in pytester's directory and in-process plugin runs on it.
- `scripted_runs`: one scripted attempt on a bundled task through pytest and Docker.
- `diff_bench`: a checkout, a sandbox and a recording toolbox, for the recorded-diff tests.
- `synthetic`: synthetic run directories (valid records) for report tests, benchmarks and demos.
"""
