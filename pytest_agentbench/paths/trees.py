"""Whole-directory operations on the host: copy, remove and chown a tree.

Remove and chown never follow a symlink (a link in a repository or one the agent made may point
anywhere on the host) and walk iteratively through directory descriptors, so no depth the agent
can make breaks them.
"""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
from pathlib import Path

from pytest_agentbench.paths.regular_files import CLOEXEC, DIR_FLAGS
from pytest_agentbench.paths.walk import Walk


def copy_tree(src: Path, dst: Path) -> None:
    """cp -a keeps owners, modes and symlinks (the sandbox user owns these files)."""
    dst.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", f"{src}/.", str(dst)], check=True, capture_output=True)


SETID_BITS = "/6000"  # find(1)'s -perm: setuid or setgid


def strip_setid(root: Path) -> None:
    """Clear the setuid and setgid bits of everything below `root`, symlinks never followed
    (they have no mode of their own): a tree others will use, such as an env-cache entry, must
    not let any local user run a file as whoever made it. Fails closed: OSError unless a second
    look finds no such bit left. For a tree nothing else writes while this runs."""
    found = ["find", "-P", str(root), "-perm", SETID_BITS, "!", "-type", "l"]
    strip = subprocess.run([*found, "-exec", "chmod", "ug-s", "--", "{}", "+"],
                           capture_output=True, text=True, check=False)
    left = subprocess.run([*found, "-print", "-quit"], capture_output=True, text=True,
                          check=False)
    if strip.returncode != 0 or left.returncode != 0 or left.stdout:
        problem = (strip.stderr or left.stderr).strip()[-300:] or f"still set: {left.stdout}"
        raise OSError(f"cannot clear setuid/setgid bits below {root}: {problem}")


def remove_tree(path: Path) -> list[str]:
    """Delete `path` and everything below it without following a symlink, iteratively: no
    recursion limit (shutil.rmtree raises RecursionError past ~1000 levels, which
    ignore_errors does not cover), no PATH_MAX, one directory descriptor open at a time. FIFOs,
    sockets and the rest are unlinked, never opened. Never raises: returns the entries it could
    not remove (relative to `path`)."""
    failed: list[str] = []
    try:
        os.lstat(path)
    except FileNotFoundError:
        return failed
    except OSError as exc:
        return [f".: {exc}"]
    if not stat.S_ISDIR(os.lstat(path).st_mode):
        try:
            os.unlink(path)
        except OSError as exc:
            failed.append(f".: {exc}")
        return failed
    names: list[str] = []  # the directories descended into, below `path`
    stuck: set[str] = set()  # relative paths that would not go
    try:
        cur = os.open(path, DIR_FLAGS)
    except OSError as exc:
        return [f".: {exc}"]
    try:
        while True:
            prefix = "/".join(names) + "/" if names else ""
            subdir = None
            with os.scandir(cur) as it:
                entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
            for name, is_dir in entries:
                if prefix + name in stuck:
                    continue
                if is_dir:
                    subdir = subdir or name
                    continue
                try:
                    os.unlink(name, dir_fd=cur)
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    stuck.add(prefix + name)
                    failed.append(f"{prefix}{name}: {exc.strerror}")
            if subdir is not None:
                try:
                    child = os.open(subdir, DIR_FLAGS, dir_fd=cur)
                except OSError as exc:
                    stuck.add(prefix + subdir)
                    failed.append(f"{prefix}{subdir}: {exc.strerror}")
                    continue
                os.close(cur)
                cur = child
                names.append(subdir)
                continue
            if not names:
                break
            done = names.pop()
            parent = os.open("..", DIR_FLAGS, dir_fd=cur)
            os.close(cur)
            cur = parent
            try:
                os.rmdir(done, dir_fd=cur)
            except OSError as exc:
                rel = "/".join([*names, done])
                stuck.add(rel)
                failed.append(f"{rel}: {exc.strerror}")
    except OSError as exc:
        failed.append(f"{'/'.join(names) or '.'}: {exc}")
        return failed
    finally:
        with contextlib.suppress(OSError):
            os.close(cur)
    try:
        os.rmdir(path)
    except OSError as exc:
        failed.append(f".: {exc.strerror}")
    return failed


CHOWN_MAX_DEPTH = 512  # deeper entries were made by the sandbox's user anyway


def chown_tree(root: Path, uid: int, gid: int) -> None:
    """Give a tree to uid:gid without following symlinks (a link in a repo may point anywhere
    on the host); entries already owned right are only stat-ed, so repeat calls are cheap.
    Iterative through directory descriptors (os.walk recursed once per level, and the agent
    can nest directories thousands deep); stops descending at CHOWN_MAX_DEPTH levels."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | CLOEXEC)
    try:
        st = os.fstat(fd)
        if st.st_uid != uid or st.st_gid != gid:
            os.fchown(fd, uid, gid)
        for entry in Walk(fd, max_entries=2**62, max_depth=CHOWN_MAX_DEPTH):
            try:
                st = os.stat(entry.name, dir_fd=entry.dir_fd, follow_symlinks=False)
                if st.st_uid != uid or st.st_gid != gid:
                    os.chown(entry.name, uid, gid, dir_fd=entry.dir_fd, follow_symlinks=False)
            except FileNotFoundError:  # gone meanwhile
                continue
    finally:
        os.close(fd)


def tree_size(root: Path) -> tuple[int, int]:
    """(bytes, entries) below `root`: each regular file counts its apparent size or what it
    allocates, whichever is more (a sparse file of 2 GiB counts 2 GiB: copied through an
    archive, or read back, it is 2 GiB of data), everything else what it allocates; hard links
    counted once, symlinks not followed, iterative (no depth limit), unreadable directories
    skipped."""
    total, count, seen, stack = 0, 0, set(), [str(root)]
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                count += 1
                if info.st_nlink > 1 and not stat.S_ISDIR(info.st_mode):
                    if (info.st_dev, info.st_ino) in seen:
                        continue
                    seen.add((info.st_dev, info.st_ino))
                total += info.st_blocks * 512
                if stat.S_ISREG(info.st_mode):
                    total += max(0, info.st_size - info.st_blocks * 512)
                if stat.S_ISDIR(info.st_mode):
                    stack.append(entry.path)
    return total, count
