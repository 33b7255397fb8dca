"""The agent port (port.py: AgentContext with its Tools and EventLog Protocols, AgentOutcome,
AgentFactory) beside the agents: oracle, nop and scripted (builtin.py), the LLM agent (llm_v0.py,
configured by llm_config.py), and variants (variants.py: which agent with what parameters;
`agent_builder` checks a variant once per run and makes its agent per attempt).

May import: tools, llm, tasks, schemas, paths, text. Never core, pytest or docker.
"""
