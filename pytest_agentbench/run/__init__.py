"""One run of many attempts, without pytest: the run's settings, its directory and state, the
attempt factory every entry point uses (plugin, replay, validate-tasks, doctor), the oracle+nop
task validation, and the run's end (summary, HTML report, cleanup).

May import: core, reporting, agents, sandbox adapters, repos and everything below. Never pytest.
"""
