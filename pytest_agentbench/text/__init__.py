"""Ground floor: what the harness does to text: head/tail truncation of command output, failure
signatures of test output, and secret redaction of everything written.

Imports only the standard library.
"""
