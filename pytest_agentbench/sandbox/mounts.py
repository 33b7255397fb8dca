"""What the workspace mounts of sandbox/disk.py (a loop-mounted ext4) and sandbox/layers.py (an
overlay) share: the tag that names the process which made a mount (in its file names), whether
that process is gone (its mounts are stale), and unmounting while keeping the content.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from pytest_agentbench.paths.trees import copy_tree


def owner_tag() -> str:
    """<pid namespace>.<pid>: whether the owner still lives can only be told in its namespace."""
    try:
        pid_ns = str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        pid_ns = "0"
    return f"{pid_ns}.{os.getpid()}"


def owner_dead(tag: str) -> bool:
    """Whether the owner named by an `owner_tag()` is a dead process of this pid namespace."""
    pid_ns, _, pid = tag.partition(".")
    return pid_ns == owner_tag().split(".")[0] and not (pid.isdigit() and pid_alive(int(pid)))


def pid_alive(pid: int) -> bool:
    """Whether a process of this pid namespace exists (one we may not signal counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def unmount_keeping(path: Path, unmount: Callable[[], None], keep: bool) -> None:
    """Run `unmount` for the mount on `path`; keep=True: its content stays at `path` as a plain
    directory (copied out first, moved back after)."""
    if not (keep and os.path.ismount(path)):
        unmount()
        return
    staging = path.parent / f".{path.name}.agentbench-keep"
    copy_tree(path, staging)
    unmount()
    for child in staging.iterdir():
        os.rename(child, path / child.name)
    staging.rmdir()
