"""Normalized failure signatures: what a failing test command says failed, stable across runs.

For pytest output the signature is the sorted set of failing/erroring test node ids from the short
summary. For anything else it is the exit code plus a digest of the output with volatile parts
(durations, addresses, temp paths, line numbers of tracebacks) removed. Signatures compare baseline
runs with each other (flakiness) and agent iterations with each other (stagnation); they never
decide a pass, which is the exit code's job.
"""

from __future__ import annotations

import hashlib
import re

_SUMMARY_LINE = re.compile(r"^(FAILED|ERROR) (\S+?)(?: - .*)?$", re.MULTILINE)
_VOLATILE = [
    (re.compile(r"\b\d+(\.\d+)?s\b"), "<t>"),  # durations like 0.12s
    (re.compile(r"0x[0-9a-fA-F]+"), "<addr>"),
    (re.compile(r"/tmp/[^\s:'\"]+"), "<tmp>"),
    (re.compile(r"\bline \d+\b"), "line <n>"),
    (re.compile(r"\d{4}-\d\d-\d\dT?[\d:.]+"), "<ts>"),
    (re.compile(r"[ \t]+"), " "),
]


def failing_tests(output: str) -> list[str]:
    """Node ids pytest listed as FAILED or ERROR in its short test summary."""
    return sorted({f"{kind} {node}" for kind, node in _SUMMARY_LINE.findall(output)})


def normalize(output: str) -> str:
    for pattern, repl in _VOLATILE:
        output = pattern.sub(repl, output)
    return output.strip()


def signature(exit_code: int, stdout: str, stderr: str) -> list[str]:
    tests = failing_tests(stdout) or failing_tests(stderr)
    if tests:
        return tests
    digest = hashlib.sha256(normalize(stdout + "\n" + stderr).encode()).hexdigest()[:16]
    return [f"exit:{exit_code}", f"output:{digest}"]


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
