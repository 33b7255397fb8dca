"""The loop-mounted ext4 that bounds a workspace in sandbox/disk.py's "filesystem" mode: make and
mount one (a sparse image file next to the workspace, named after its owner), unmount it, and
find those whose process died or whose image was deleted.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import stat
import subprocess
from pathlib import Path

from pytest_agentbench.sandbox.mounts import owner_tag, pid_alive

DISK_TAG = ".agentbench-disk-"  # images: <parent>/.agentbench-disk-<pidns>.<pid>-<name>.img


def _run(argv: list[str]) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0:
        raise OSError(f"{' '.join(argv[:2])} failed: {proc.stderr.strip()[-300:]}")


def mount_loopfs(path: Path, limit_mb: int) -> Path:
    """Mount a fresh ext4 of at least `limit_mb` MiB usable space on the empty dir `path`, with
    its owner and mode; returns the (sparse) image file, next to `path`."""
    st = path.stat()
    image = path.parent / f"{DISK_TAG}{owner_tag()}-{path.name}.img"
    size_mb = math.ceil(limit_mb / 0.97) + 4  # ext4's own overhead (~3 %) comes on top
    with open(image, "wb") as handle:
        handle.truncate(size_mb << 20)
    try:
        _run(["mkfs.ext4", "-q", "-F", "-m", "0", "-b", "4096", "-O", "^has_journal",
              "-E", f"lazy_itable_init=1,root_owner={st.st_uid}:{st.st_gid}", "-L", "agentbench",
              str(image)])
        _run(["mount", "-o", "loop,nosuid,nodev,noatime", str(image), str(path)])
    except (OSError, subprocess.SubprocessError):
        image.unlink(missing_ok=True)
        raise
    with contextlib.suppress(OSError):
        (path / "lost+found").rmdir()
    os.chmod(path, stat.S_IMODE(st.st_mode))
    return image


def unmount_loopfs(path: Path, image: Path | None) -> None:
    """Unmount (lazily if something still holds it) and delete the image; `path` stays."""
    if os.path.ismount(path):
        try:
            _run(["umount", str(path)])
        except OSError:
            _run(["umount", "-l", str(path)])
    if image is not None:
        image.unlink(missing_ok=True)


def stale_loopfs() -> list[tuple[Path, Path]]:
    """(mount point, image) of workspace filesystems whose process is gone or whose image was
    deleted (the attempt's directory was removed without `release`)."""
    stale = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        fields = line.split(" ")
        source = fields[fields.index("-") + 2] if "-" in fields else ""
        if not source.startswith("/dev/loop"):
            continue
        try:
            backing = Path(f"/sys/block/{source[5:]}/loop/backing_file").read_text().strip()
        except OSError:
            continue
        name = os.path.basename(backing.removesuffix(" (deleted)"))
        if not name.startswith(DISK_TAG):
            continue
        pid_ns, _, rest = name[len(DISK_TAG):].partition(".")
        pid = rest.split("-", 1)[0]
        ours = pid_ns == owner_tag().split(".")[0]
        if backing.endswith(" (deleted)") or (ours and not (pid.isdigit() and pid_alive(int(pid)))):
            mount_point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), fields[4])
            stale.append((Path(mount_point), Path(backing.removesuffix(" (deleted)"))))
    return stale
