"""Tests of pytest-agentbench itself."""
