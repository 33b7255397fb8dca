"""The agent port (port.py) beside the agents: oracle, nop and scripted (builtin.py), the LLM
agent (llm_v0.py), and variants (which agent, with what parameters; entry-point agents).

May import: tools, llm, tasks, schemas, paths, text. Never core, pytest or docker.
"""
