"""What every frame cache test here shares: a cache for every run, however small, and a count
of the parses."""

from __future__ import annotations

from typing import Any

import pytest

import pytest_agentbench.reporting.load as load
import pytest_agentbench.reporting.record_parse as record_parse


@pytest.fixture(autouse=True)
def cache_small_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cache every run here, however small (the loader skips files under 1 MiB)."""
    monkeypatch.setattr(load, "CACHE_MIN_BYTES", 0)


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times attempts.jsonl was parsed (a cache hit parses nothing)."""
    calls: list[int] = []
    real = record_parse.parse_jsonl

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(record_parse, "parse_jsonl", counted)
    return calls
