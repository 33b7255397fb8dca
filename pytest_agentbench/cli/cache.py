"""`agentbench cache ls|prune`: what the environment cache holds, and making it smaller.

The cache is core/envcache.py; its root and cap come from run/envcaches.py (the same defaults
and environment variables as a run: $AGENTBENCH_ENV_CACHE, $AGENTBENCH_ENV_CACHE_MAX_SIZE).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from pytest_agentbench.run.envcaches import format_size, open_env_cache, parse_size


def add_cache_command(sub: Any) -> None:
    cache = sub.add_parser("cache", help="the environment cache: list or prune entries")
    cmds = cache.add_subparsers(dest="cache_cmd", required=True)
    ls = cmds.add_parser("ls", help="list entries, least recently used first")
    ls.add_argument("--json", action="store_true", help="one JSON object per entry")
    prune = cmds.add_parser("prune", help="evict least recently used entries not in use")
    group = prune.add_mutually_exclusive_group()
    group.add_argument("--max-size", metavar="SIZE", help="down to SIZE (default: the cap)")
    group.add_argument("--all", action="store_true", help="every entry not in use")
    for command in (ls, prune):
        command.add_argument("--env-cache", metavar="DIR", help="cache root (default as a run)")
        command.add_argument("--env-cache-max-size", metavar="SIZE", help="cap (default 20G)")
    ls.set_defaults(func=_ls)
    prune.set_defaults(func=_prune)


def _open(args: argparse.Namespace) -> Any:
    try:
        cache = open_env_cache(args.env_cache, args.env_cache_max_size, "--env-cache-max-size")
    except ValueError as exc:
        print(f"agentbench cache: {exc}", file=sys.stderr)
        return None
    if cache is None:
        print("agentbench cache: the environment cache is disabled (none)", file=sys.stderr)
    return cache


def _ls(args: argparse.Namespace) -> int:
    cache = _open(args)
    if cache is None:
        return 2
    entries = sorted(cache.entries(), key=lambda e: e.last_used)
    if args.json:
        for e in entries:
            print(json.dumps({"key": e.key, "bytes": e.bytes, "files": e.files,
                              "created": e.created, "last_used": e.last_used,
                              "in_use": e.in_use, "task": e.meta.get("task"),
                              "suite": e.meta.get("suite"), "setup_sec": e.meta.get("setup_sec")}))
        return 0
    total = sum(e.bytes for e in entries)
    print(f"root: {cache.root} (cap {format_size(cache.max_bytes or 0)})")
    if entries:
        print(f"{'KEY':24}  {'SIZE':>7}  {'FILES':>7}  {'LAST USED':19}  {'SETUP':>7}  TASK")
    for e in entries:
        used = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e.last_used))
        task = f"{e.meta.get('suite', '?')}/{e.meta.get('task', '?')}"
        setup = f"{e.meta.get('setup_sec', 0):.1f}s"
        print(f"{e.key:24}  {format_size(e.bytes):>7}  {e.files:>7}  {used:19}  {setup:>7}  "
              f"{task}{'  (in use)' if e.in_use else ''}")
    print(f"{len(entries)} entries, {format_size(total)} of {format_size(cache.max_bytes or 0)}")
    return 0


def _prune(args: argparse.Namespace) -> int:
    cache = _open(args)
    if cache is None:
        return 2
    try:
        target = parse_size(args.max_size, "--max-size") if args.max_size else None
    except ValueError as exc:
        print(f"agentbench cache: {exc}", file=sys.stderr)
        return 2
    removed = cache.prune(max_bytes=target, everything=args.all)
    left, size = cache.footprint()
    print(f"removed {len(removed)} entries ({format_size(sum(e.bytes for e in removed))}); "
          f"{left} left ({format_size(size)})")
    return 0
