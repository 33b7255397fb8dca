"""context_manifest.json: one entry per packing step under `packs`, each item included or
excluded with its reason and estimated tokens (the HTML report shows it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_agentbench.agents.context_pack.packing import CHARS_PER_TOKEN, Packed

MANIFEST_NAME = "context_manifest.json"
MANIFEST_VERSION = 1


def pack_entry(step: int, packed: Packed) -> dict[str, Any]:
    return {"step": step, "used_tokens": packed.used_tokens,
            "items": [item.manifest() for item in packed.items]}


def manifest(agent: str, budget_tokens: int, packs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"version": MANIFEST_VERSION, "agent": agent, "budget_tokens": budget_tokens,
            "chars_per_token": CHARS_PER_TOKEN, "packs": packs}


def write_manifest(directory: Path, data: dict[str, Any]) -> Path:
    """Written whole each time (a temporary file renamed over it), so a reader never sees half."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / MANIFEST_NAME
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path
