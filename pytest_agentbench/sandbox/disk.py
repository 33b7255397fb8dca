"""The workspace's disk limit (SandboxSpec.disk_limit_mb), enforced one of three ways.

"filesystem": before anything is put in it, the workspace becomes a loop-mounted ext4 of the
limit's size (`provision`). A hard bound: writes past it fail with ENOSPC, whatever writes them.
Needs root, loop devices, mkfs.ext4, and an engine in this host's mount namespace (it must see
the mount). The image is a sparse file next to the workspace (sandbox/loopfs.py mounts it);
`release` unmounts it, and mounts whose process died or whose image was deleted are unmounted
by `release_stale` (at every `provision` and by `agentbench gc`).

"watched" (a local engine that cannot be bounded so): the host measures the workspace while a
command runs and kills the command once the workspace grew past the limit; RLIMIT_FSIZE caps each
file at the limit. A soft bound: the overshoot is the write rate times the poll interval
(measured here at 2 GiB: <= 62 MiB for one writer, <= 152 MiB for four), and fallocate bursts
within one poll are not stopped in time (they are reported, and the next command that grows the
workspace is killed).

"measured" (archive transfer: the workspace is a volume on the engine, which the host cannot
see): the sandbox measures its workspace itself, at the end of every command (the wrapper runs
MEASURE after it reaped the command, and reports in its trailer) and every MEASURE_POLL_SEC while
one runs (a command of its own), and kills a command that grew it past the limit; RLIMIT_FSIZE
caps each file at the limit. A soft bound too: the overshoot is the write rate times
MEASURE_POLL_SEC. A workspace that cannot be measured (a directory the sandbox user cannot read)
counts as over the limit.

Every size here is a file's apparent size or what it allocates, whichever is more (paths/trees.
tree_size; du's two sums in the sandbox): a sparse file is as big as the data it ships as.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from pytest_agentbench.paths.trees import tree_size
from pytest_agentbench.sandbox.loopfs import mount_loopfs, stale_loopfs, unmount_loopfs
from pytest_agentbench.sandbox.mounts import unmount_keeping

FULL_BYTES = 1 << 20  # a bounded filesystem with less free space than this is full
WATCH_POLL_SEC = 0.1  # one statvfs
STALE_SEC = 2.0  # watched: walk at least this often while commands run
MEASURE_POLL_SEC = 1.0  # measured: measure in the sandbox this often while a command runs
# Shell: $s := "<apparent bytes>:<allocated bytes>" of the directory $d, or "-" when du fails
# (an unreadable directory, no fork possible). Runs as the command user, after the reap (no
# timeout of its own: the host's deadline for the command covers it).
MEASURE = (
    "s=-; if [ -n \"$d\" ] && a=$(command -p du -s -B1 --apparent-size -- \"$d\" 2>/dev/null) "
    "&& b=$(command -p du -s -B1 -- \"$d\" 2>/dev/null); then "
    "s=${a%%[!0-9]*}:${b%%[!0-9]*}; fi\n")
MEASURE_SCRIPT = 'd=$1\n' + MEASURE + 'printf "\\nagentbench-usage:%s\\n" "$s"\n'


def loopfs_unavailable(engine_host: str) -> str | None:
    """Why a loop-mounted filesystem cannot bound a workspace here (None: it can)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "the harness is not root (mounting a filesystem needs root)"
    if not os.path.exists("/dev/loop-control"):
        return "this host has no loop devices"
    missing = [tool for tool in ("mkfs.ext4", "mount", "umount") if shutil.which(tool) is None]
    if missing:
        return f"{', '.join(missing)} not found"
    if not engine_host.startswith("unix://"):
        return f"the engine ({engine_host}) does not see this host's mounts"
    try:
        pid = int(Path("/run/docker.pid").read_text().strip())
        theirs, ours = os.stat(f"/proc/{pid}/ns/mnt"), os.stat("/proc/self/ns/mnt")
        same = (theirs.st_dev, theirs.st_ino) == (ours.st_dev, ours.st_ino)
    except (OSError, ValueError):
        return "cannot tell whether the engine sees this host's mounts (no /run/docker.pid)"
    return None if same else "the engine runs in another mount namespace"


def tree_usage(root: Path) -> int:
    """Bytes under `root`, apparent or allocated, whichever is more for each file (hard links
    once, symlinks not followed)."""
    return tree_size(root)[0]


def parse_usage(field: str | None) -> int | None:
    """Bytes from MEASURE's "<apparent>:<allocated>" (the larger); None when not measured."""
    if field is None:
        return None
    apparent, _, allocated = field.strip().partition(":")
    if not (apparent.isdigit() and allocated.isdigit()):
        return None
    return max(int(apparent), int(allocated))


def trailer_usage(trailer: bytes | None) -> str | None:
    """The wrapper trailer's usage field (MEASURE's $s), if it has one."""
    if trailer is None:
        return None
    fields = trailer.decode(errors="replace").strip("\n\x1e").split(" ")
    return fields[4] if len(fields) >= 5 else None


def script_usage(output: str) -> str | None:
    """MEASURE_SCRIPT's usage field from its output."""
    for line in reversed(output.splitlines()):
        if line.startswith("agentbench-usage:"):
            return line[len("agentbench-usage:"):]
    return None


SIGXFSZ_EXIT = 128 + signal.SIGXFSZ  # a shell's status for a command stopped at `ulimit -f`


class DiskGuard:
    """One sandbox's view of its workspace limit: what to tell the wrapper, what to poll while a
    command runs, and whether the command hit the limit.

    Watched mode walks the workspace only when it has to: the drop in the host filesystem's
    free space since the last walk bounds how much the workspace can have grown (others'
    writes only make that bound larger), so a poll is one statvfs and a walk happens when the
    bound crosses the limit, at most every 5x what a walk costs. Space that others free at the
    same time hides growth from that bound, so there is a walk at least every STALE_SEC too,
    and after every command that ran longer than half of that.
    """

    def __init__(self, workspace: Path, limit_mb: int | None, mode: str,
                 measure: Callable[[], str | None] | None = None) -> None:
        """`measure` (mode "measured"): runs MEASURE_SCRIPT in the sandbox, returns its field."""
        self.workspace, self.mode = workspace, mode if limit_mb else "none"
        self._measure = measure
        self._unmeasured = False  # measured: the last measurement failed (counted as over)
        self.limit = (limit_mb or 0) << 20
        self.limit_mb = limit_mb
        self._used: int | None = None  # watched: an upper bound of the workspace's size ...
        self._free = 0  # ... given this much free space on the host filesystem
        self._before = 0  # watched: the bound when the command started
        self._next_walk = self._walked_at = self._started = 0.0
        self._was_full = False

    @property
    def fsize_kib(self) -> str:
        return str(self.limit >> 10) if self.mode in ("watched", "measured") else ""

    @property
    def polls(self) -> bool:
        return self.mode in ("watched", "measured")

    @property
    def measures(self) -> bool:
        """Whether the wrapper should measure the workspace after the command (MEASURE)."""
        return self.mode == "measured"

    def start(self) -> None:
        if self.mode == "measured":
            self._before = self._used if self._used is not None else 0
            self._started = self._walked_at = time.monotonic()
        elif self.mode == "watched":
            if self._used is None:
                self._walk()
            self._before, self._started = self._estimate(), time.monotonic()
            if self._before >= self.limit:  # others' writes inflate the bound: know it exactly
                self._before = self._walk()
        elif self.mode == "filesystem":
            self._was_full = self._full()

    def grew_past(self) -> bool:
        """Watched: the workspace is over the limit and bigger than when the command started."""
        ceiling = max(self.limit, self._before)
        now = time.monotonic()
        if self.mode == "measured":
            if now - self._walked_at < MEASURE_POLL_SEC:
                return False
            self._walked_at = now
            return self._sandbox_usage(None) > ceiling
        if now < self._next_walk or (self._estimate() <= ceiling and not self._stale(now)):
            return False
        return self._walk() > ceiling

    def hit_after(self, exit_code: int, reported: str | None = None) -> bool:
        """Whether the command left the workspace over the limit (and bigger than before it).
        `reported`: the wrapper's MEASURE field (measured mode; None: measure now)."""
        if self.mode == "measured":
            usage = self._sandbox_usage(reported)
            self._used = None if self._unmeasured else usage
            return usage >= self.limit and usage > self._before
        if self.mode == "filesystem":
            full = self._full()
            return full and (not self._was_full or exit_code != 0)
        if self.mode == "watched":
            usage, now = self._estimate(), time.monotonic()
            if (usage >= self.limit or exit_code == SIGXFSZ_EXIT or self._stale(now)
                    or now - self._started > STALE_SEC / 2):
                # a command that ran a while may have written a lot; one the kernel stopped at
                # the file size limit did, whatever space others freed meanwhile
                usage = self._walk()
            return usage >= self.limit and usage > self._before
        return False

    def _sandbox_usage(self, reported: str | None) -> int:
        """Measured mode: the workspace's size in the sandbox, from the wrapper's report or a
        measurement now; one that cannot be measured counts as over the limit (fails closed)."""
        usage = parse_usage(reported)
        if usage is None and self._measure is not None:
            try:
                usage = parse_usage(self._measure())
            except Exception:  # noqa: BLE001 - the engine failed: the next command says so
                usage = None
        self._unmeasured = usage is None
        return max(self.limit, self._before + 1) if usage is None else usage

    def _estimate(self) -> int:
        used = self._used or 0
        return used + max(0, self._free - self._host_free())

    def _stale(self, now: float) -> bool:
        return now - self._walked_at > STALE_SEC

    def _walk(self) -> int:
        self._walked_at = started = time.monotonic()
        free = self._host_free()
        self._used, self._free = tree_usage(self.workspace), free
        self._next_walk = time.monotonic() + 5 * (time.monotonic() - started)
        return self._used

    def _host_free(self) -> int:
        try:
            fs = os.statvfs(self.workspace)
        except OSError:
            return self._free
        return fs.f_bfree * fs.f_frsize

    def _full(self) -> bool:
        try:
            fs = os.statvfs(self.workspace)
        except OSError:
            return False
        return fs.f_bavail * fs.f_frsize < FULL_BYTES or (fs.f_files > 0 and fs.f_favail == 0)

    def message(self, killed: bool) -> str:
        what = ("the command was killed" if killed else "writes past it fail"
                if self.mode == "filesystem" else "it is over the limit")
        if self._unmeasured:
            return (f"\nagentbench: the workspace could not be measured against its disk limit "
                    f"of {self.limit_mb} MiB (a directory the sandbox user cannot read?), so it "
                    f"counts as over it ({what}); make every directory readable to go on\n")
        return (f"\nagentbench: the workspace reached its disk limit of {self.limit_mb} MiB "
                f"({what}); free space to go on\n")


# -- the workspaces this process bounded -----------------------------------------------------------
_MOUNTED: dict[str, Path] = {}  # workspace -> image of its loop-mounted filesystem
_LOCK = threading.Lock()


def _key(path: Path) -> str:
    return os.path.abspath(path)


def provision(
    path: Path, limit_mb: int | None, loopfs_problem: str | None
) -> tuple[str, str | None]:
    """Make `path` an empty directory bounded to `limit_mb`: ("filesystem" | "watched" | "none",
    why not "filesystem")."""
    path = Path(_key(path))
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise OSError(f"cannot bound {path}: it must be an empty directory")
    path.mkdir(parents=True, exist_ok=True)
    if not limit_mb:
        return "none", None
    release_stale()
    if loopfs_problem is not None:
        return "watched", loopfs_problem
    try:
        image = mount_loopfs(path, limit_mb)
    except (OSError, subprocess.SubprocessError) as exc:
        return "watched", f"mounting a loop filesystem failed: {exc}"
    with _LOCK:
        _MOUNTED[_key(path)] = image
    return "filesystem", None


def is_mounted(path: Path) -> bool:
    with _LOCK:
        return _key(path) in _MOUNTED


def release(path: Path, keep: bool = False) -> None:
    """Unmount `path` if this process bounded it; keep=True moves the content out first (it
    stays at `path` as a plain directory)."""
    with _LOCK:
        image = _MOUNTED.get(_key(path))
    if image is None:
        return
    unmount_keeping(path, lambda: unmount_loopfs(path, image), keep)
    with _LOCK:
        _MOUNTED.pop(_key(path), None)


def release_all() -> int:
    """Unmount everything this process bounded and did not release (atexit, session end)."""
    with _LOCK:
        mounted = list(_MOUNTED.items())
        _MOUNTED.clear()
    for path, image in mounted:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            unmount_loopfs(Path(path), image)
    return len(mounted)


def release_stale() -> int:
    """Unmount workspace filesystems of dead processes, or whose image was deleted (their
    attempt directory was removed without `release`)."""
    stale = stale_loopfs()
    for mount_point, image in stale:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            unmount_loopfs(mount_point, image)
        with _LOCK:
            _MOUNTED.pop(_key(mount_point), None)
    return len(stale)
