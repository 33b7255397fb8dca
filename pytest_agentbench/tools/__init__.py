"""The agent's tools: the toolbox with its one `call(name, arguments)` entry point, the
read-only tools, the strict unified-diff patch engine, the tool schemas and the tool results.

May import: sandbox (its port), paths, text, schemas. Never pytest, docker or httpx.
"""
