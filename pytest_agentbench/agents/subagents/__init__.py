"""The `subagents` variant (spec week 10): a router decides the next action and delegates it to
specialists (searcher, patcher, tester) that answer with structured outputs. `SubagentsAgent`
is in agent.py; the rest are small parts it is built from."""
