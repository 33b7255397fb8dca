"""The `agentbench` console script: everything that is not a test run."""
