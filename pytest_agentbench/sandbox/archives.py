"""Directory trees as tar streams, both ways, for engines that share no filesystem with us.

`tar_chunks` streams a host directory as a tar (to the Docker archive API) without holding it in
memory: one member at a time, every entry owned by the sandbox user, no socket, nothing followed.
`extract_into` replaces a host directory's content with a tar stream from the engine. What comes
back was written by the agent (and, on a remote engine, crossed a network), so it goes through
tarfile's `tar` filter: no absolute name, nothing outside the directory (checked after resolving
the links already extracted, so no member can be written through a symlink), no device, no
setuid bit; a symlink itself may point anywhere, as it may in the workspace.

Sizes are apparent sizes both ways: a tar carries every byte of a file, holes included, and the
engine writes them all into its volume (a sparse file of 2 GiB that allocates 128 KiB here is 2
GiB of zeros there). `tar_chunks` refuses a tree whose files exceed its budget, or whose sparse
files' holes exceed SPARSE_MAX_BYTES, before that much is sent; `extract_into` stops past its
byte budget (read from each member's header, before its data) or MAX_MEMBERS entries.
"""

from __future__ import annotations

import os
import stat
import tarfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from pytest_agentbench.paths.trees import remove_tree

FLUSH_BYTES = 1024 * 1024
MAX_MEMBERS = 100_000  # entries extract_into takes from one stream (200,000 empty files: 24 s)
SPARSE_MAX_BYTES = 64 << 20  # holes of sparse files one shipped tree may carry (written out)
INCOMPLETE_NOTE = "AGENTBENCH-INCOMPLETE.txt"  # put in a copy that stopped at a bound


class _Sink:
    """A write-only file object whose bytes are taken out by the generator feeding the upload."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.size = 0

    def write(self, data: bytes) -> int:
        self.parts.append(bytes(data))
        self.size += len(data)
        return len(data)

    def take(self) -> bytes:
        data = b"".join(self.parts)
        self.parts.clear()
        self.size = 0
        return data


def _entries(root: Path) -> Iterator[tuple[Path, str]]:
    """(path, name below root) in walk order, parents first, never following a symlink."""
    stack = [(root, "")]
    while stack:
        directory, prefix = stack.pop()
        with os.scandir(directory) as listing:
            entries = sorted(listing, key=lambda e: e.name)
        subdirs = []
        for entry in entries:
            rel = prefix + entry.name
            yield Path(entry.path), rel
            if entry.is_dir(follow_symlinks=False):
                subdirs.append((Path(entry.path), rel + "/"))
        stack.extend(reversed(subdirs))


def _holes(path: Path, size: int, allocated: int) -> int:
    """Bytes of holes in a regular file (0 for one that is not sparse): fewer blocks than its
    size is only a hint (compression does that too), a hole SEEK_HOLE finds before its end
    decides."""
    if allocated >= size or not hasattr(os, "SEEK_HOLE"):
        return 0
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return 0  # the read below fails the same way, with its own error
    try:
        return size - allocated if os.lseek(fd, 0, os.SEEK_HOLE) < size else 0
    except OSError:
        return 0
    finally:
        os.close(fd)


def tar_chunks(trees: Iterable[tuple[str, Path | None]], uid: int, gid: int,
               root_mode: int = 0o755,
               budgets: Mapping[str, int] | None = None,
               owner_bits_for_all: bool = False) -> Iterator[bytes]:
    """A tar of each (top-level name, host dir) pair, streamed in pieces of about FLUSH_BYTES:
    the top-level directory itself (owned by uid:gid, so a volume's root is the sandbox user's),
    then everything below it. A `None` dir gives an empty top-level directory.

    `owner_bits_for_all`: every entry's group and others get the owner's read and execute bits
    and no write bit (a copy owned by someone else than the directory's owner, read-only).

    `budgets[top]`: the file bytes (apparent sizes) that tree may ship; past it, or past
    SPARSE_MAX_BYTES of holes in its sparse files, ArchiveRefused (naming the file) ends the
    stream before that file's data is sent."""
    sink = _Sink()
    tar = tarfile.open(  # noqa: SIM115 - closed below, between yields
        fileobj=sink, mode="w|", format=tarfile.PAX_FORMAT)  # type: ignore[call-overload]

    def owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid, info.gid, info.uname, info.gname = uid, gid, "", ""
        if owner_bits_for_all:  # what the owner may read or run, everyone may; none may write
            readable = info.mode & 0o500
            info.mode = (info.mode & ~0o077) | readable >> 3 | readable >> 6
        return info

    for top, directory in trees:
        head = tarfile.TarInfo(top)
        head.type, head.mode = tarfile.DIRTYPE, root_mode
        if directory is not None:
            head.mode = stat.S_IMODE(directory.stat().st_mode)
            head.mtime = int(directory.stat().st_mtime)
        tar.addfile(owned(head))
        if directory is None:
            continue
        budget = (budgets or {}).get(top)
        shipped = holes = 0
        for path, rel in _entries(directory):
            info = tar.gettarinfo(str(path), f"{top}/{rel}")
            if info is None:  # a socket
                continue
            if info.isreg():
                shipped += info.size
                if budget is not None and shipped > budget:
                    raise ArchiveRefused(
                        f"{top}/ holds more than {budget >> 20} MiB of files (apparent sizes, "
                        f"holes of sparse files included), reached at {top}/{rel}")
                st = path.lstat()
                holes += _holes(path, st.st_size, st.st_blocks * 512)
                if holes > SPARSE_MAX_BYTES:
                    raise ArchiveRefused(
                        f"{top}/{rel} is a sparse file of {st.st_size >> 20} MiB that allocates "
                        f"{(st.st_blocks * 512) >> 10} KiB here: shipped, its holes would be "
                        f"written out in full (more than {SPARSE_MAX_BYTES >> 20} MiB of holes "
                        f"in {top}/)")
                with path.open("rb") as handle:
                    tar.addfile(owned(info), handle)
            else:
                tar.addfile(owned(info))
            if sink.size >= FLUSH_BYTES:
                yield sink.take()
    tar.close()
    yield sink.take()


class _StreamReader:
    """A read-only file object over an iterator of byte chunks (docker-py's archive stream)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks, self._buffer = chunks, bytearray()

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self._buffer) < size:
            try:
                self._buffer += next(self._chunks)
            except StopIteration:
                break
        cut = len(self._buffer) if size < 0 else min(size, len(self._buffer))
        data = bytes(self._buffer[:cut])
        del self._buffer[:cut]
        return data


class ArchiveRefused(Exception):
    """What the engine sent cannot be extracted safely or exceeds the byte budget."""


def _inside(target: Path, path: str) -> bool:
    real, root = os.path.realpath(path), os.path.realpath(target)
    return real == root or real.startswith(root + os.sep)


def extract_into(chunks: Iterator[bytes], target: Path, top: str,
                 max_bytes: int | None = None, max_members: int | None = None) -> int:
    """Replace `target`'s content with the tar stream's member `top` and what is below it (the
    shape of a Docker get_archive of a directory). Returns the number of members extracted.

    The stream may be hostile (a compromised engine; what the agent made): a hard link must
    resolve inside `target`, devices are refused, FIFOs and sockets skipped, `.` members and the
    top itself only name directories that exist, whatever is at a regular file's path is
    unlinked first (never written through), and past `max_bytes` of file content (apparent
    sizes: a sparse file costs the engine nothing and the host its full size) or `max_members`
    entries (default MAX_MEMBERS) it stops, leaving what it extracted so far. ArchiveRefused
    says why."""
    member_cap = MAX_MEMBERS if max_members is None else max_members
    for child in list(target.iterdir()):
        if child.is_dir() and not child.is_symlink():
            remove_tree(child)
        else:
            child.unlink()
    count = total = 0
    with tarfile.open(fileobj=_StreamReader(chunks), mode="r|") as tar:  # type: ignore[call-overload]
        for member in tar:
            name = member.name.rstrip("/")
            if name == top:
                continue
            if not name.startswith(top + "/"):
                raise ArchiveRefused(f"{member.name!r} is outside {top}/")
            member.name = name[len(top) + 1:]
            if member.name in ("", ".") or member.name.endswith("/."):
                continue
            if member.ischr() or member.isblk():
                raise ArchiveRefused(f"{member.name!r} is a device")
            if member.isfifo() or not (member.isreg() or member.isdir() or member.issym()
                                       or member.islnk()):
                continue
            dest = os.path.join(target, member.name)
            if not _inside(target, os.path.dirname(dest)):  # through a link already extracted
                raise ArchiveRefused(f"{member.name!r} leads out of the directory")
            if member.islnk():  # a hard link names its target by its path in the stream
                if not member.linkname.startswith(top + "/"):
                    raise ArchiveRefused(f"hard link {member.name!r} leaves {top}/")
                member.linkname = member.linkname[len(top) + 1:]
                if not _inside(target, os.path.join(target, member.linkname)):
                    raise ArchiveRefused(f"hard link {member.name!r} leaves the directory")
            if count >= member_cap:
                raise ArchiveRefused(f"more than {member_cap} entries")
            if member.isreg():
                total += member.size
                if max_bytes is not None and total > max_bytes:
                    raise ArchiveRefused(f"more than {max_bytes >> 20} MiB of files (apparent "
                                         f"sizes), reached at {member.name!r}")
            if not member.isdir() and os.path.lexists(dest) and not os.path.isdir(dest):
                os.unlink(dest)  # a file there is replaced, never written through
            tar.extract(member, target, filter="tar", numeric_owner=True)
            count += 1
    return count
