"""pytest-agentbench: evaluate AI coding agents on bug-fix tasks, as pytest items."""

__version__ = "0.1.0"
