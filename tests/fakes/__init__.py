"""Reusable fakes for the harness's own tests (real servers on loopback, not mocks)."""
