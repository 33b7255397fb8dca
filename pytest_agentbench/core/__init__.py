"""The attempt pipeline: prepare → setup → baseline → agent → score → record (pipeline.py), and what
only it needs: baseline validation, snapshots and diffs, evidence, scoring, recording, the event
sink and the run directory layout.

May import: agents (the port), tools, sandbox (the port), repos, tasks, schemas, paths, text.
Never pytest, docker or httpx: adapters are passed in.
"""
