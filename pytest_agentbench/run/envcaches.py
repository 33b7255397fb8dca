"""Where the environment cache lives and how big it may grow, from options, ini or defaults.

The cache itself (entries, locks, eviction) is core/envcache.py; `agentbench cache ls|prune`
is cli/cache.py.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from pytest_agentbench.core.envcache import EnvCache

DEFAULT_MAX_SIZE = "20G"
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)


def parse_size(text: str, where: str) -> int:
    """Bytes from `500M`, `20G`, `1.5TiB` or a plain byte count; ValueError naming `where`."""
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"{where}: expected a size such as 500M or 20G, got {text!r}")
    return int(float(match[1]) * _UNITS[match[2].lower()])


def default_root() -> Path:
    return Path.home() / ".cache" / "agentbench" / "envs"


def open_env_cache(root: str | None, max_size: str | None,
                   where: str = "--agentbench-env-cache-max-size") -> EnvCache | None:
    """The cache at `root` (or $AGENTBENCH_ENV_CACHE, or the default; `none` disables it),
    capped at `max_size` (or $AGENTBENCH_ENV_CACHE_MAX_SIZE, or DEFAULT_MAX_SIZE)."""
    root = root or os.environ.get("AGENTBENCH_ENV_CACHE")
    if root == "none":
        return None
    size = max_size or os.environ.get("AGENTBENCH_ENV_CACHE_MAX_SIZE") or DEFAULT_MAX_SIZE
    return EnvCache(Path(root) if root else default_root(), parse_size(size, where))


def format_size(size: int) -> str:
    for unit, scale in (("T", 1 << 40), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f}{unit}"
    return f"{size}B"
