"""Tar streams both ways (sandbox/archives.py): a workspace round-trips intact, and what a
hostile engine sends back cannot reach outside the host directory (cold review of issue 12:
a hard link to ../secret followed by a file of the same name overwrote the file outside)."""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pytest_agentbench.sandbox.archives import ArchiveRefused, extract_into, tar_chunks


def _stream(build: Callable[[tarfile.TarFile], None]) -> Iterator[bytes]:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        build(tar)
    data = buffer.getvalue()
    return iter([data[i:i + 7000] for i in range(0, len(data), 7000)])


def _dir(tar: tarfile.TarFile, name: str) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.mode = tarfile.DIRTYPE, 0o755
    tar.addfile(info)


def _file(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o644
    tar.addfile(info, io.BytesIO(data))


def _link(tar: tarfile.TarFile, name: str, target: str, kind: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    tar.addfile(info)


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path]:
    target = tmp_path / "host" / "workspace"
    target.mkdir(parents=True)
    secret = tmp_path / "host" / "secret.txt"
    secret.write_text("precious\n")
    return target, secret


def test_a_workspace_round_trips(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "pkg" / "deep").mkdir(parents=True)
    (src / "pkg" / "deep" / "m.py").write_text("X = 1\n")
    (src / "run.sh").write_text("#!/bin/sh\n")
    (src / "run.sh").chmod(0o755)
    os.symlink("/usr/bin/python3", src / "python")  # a venv's absolute link stays a link
    os.symlink("pkg/deep", src / "inner")
    os.link(src / "run.sh", src / "hard.sh")
    out = tmp_path / "out"
    out.mkdir()
    (out / "stale.txt").write_text("gone after")
    stream = b"".join(tar_chunks([("workspace", src)], os.getuid(), os.getgid()))
    count = extract_into(iter([stream]), out, "workspace")
    assert count == 7
    assert not (out / "stale.txt").exists()
    assert (out / "pkg" / "deep" / "m.py").read_text() == "X = 1\n"
    assert os.readlink(out / "python") == "/usr/bin/python3"
    assert (out / "inner" / "m.py").read_text() == "X = 1\n"
    assert (out / "run.sh").stat().st_mode & 0o777 == 0o755
    assert (out / "hard.sh").stat().st_ino == (out / "run.sh").stat().st_ino


def test_a_hard_link_out_then_a_file_through_it_is_refused(places: tuple[Path, Path]) -> None:
    target, secret = places

    def build(tar: tarfile.TarFile) -> None:
        _dir(tar, "workspace")
        _link(tar, "workspace/h", "workspace/../secret.txt", tarfile.LNKTYPE)
        _file(tar, "workspace/h", b"OVERWRITTEN\n")

    with pytest.raises(ArchiveRefused, match="hard link"):
        extract_into(_stream(build), target, "workspace")
    assert secret.read_text() == "precious\n"


def test_nothing_is_written_through_a_symlink(places: tuple[Path, Path]) -> None:
    target, secret = places

    def build(tar: tarfile.TarFile) -> None:
        _dir(tar, "workspace")
        _link(tar, "workspace/s", str(secret), tarfile.SYMTYPE)
        _file(tar, "workspace/s", b"OVERWRITTEN\n")  # the same name again: replaces the link
        _link(tar, "workspace/d", str(secret.parent), tarfile.SYMTYPE)
        _file(tar, "workspace/d/secret.txt", b"OVERWRITTEN\n")  # through a directory link

    with pytest.raises(ArchiveRefused, match="leads out"):
        extract_into(_stream(build), target, "workspace")
    assert secret.read_text() == "precious\n"
    assert (target / "s").read_text() == "OVERWRITTEN\n" and not (target / "s").is_symlink()


@pytest.mark.parametrize("name", ["etc/passwd", "/workspace/x", "workspacex/y"])
def test_names_outside_the_top_are_refused(places: tuple[Path, Path], name: str) -> None:
    target, _ = places

    def build(tar: tarfile.TarFile) -> None:
        _dir(tar, "workspace")
        _file(tar, name, b"x")

    with pytest.raises(ArchiveRefused):
        extract_into(_stream(build), target, "workspace")


def test_devices_are_refused_fifos_skipped_and_dot_ignored(places: tuple[Path, Path]) -> None:
    target, _ = places
    before = target.stat().st_mode

    def build(tar: tarfile.TarFile) -> None:
        _dir(tar, "workspace")
        dot = tarfile.TarInfo("workspace/.")
        dot.type, dot.mode = tarfile.DIRTYPE, 0
        tar.addfile(dot)
        fifo = tarfile.TarInfo("workspace/pipe")
        fifo.type = tarfile.FIFOTYPE
        tar.addfile(fifo)
        _file(tar, "workspace/ok.txt", b"ok")

    assert extract_into(_stream(build), target, "workspace") == 1
    assert target.stat().st_mode == before and not (target / "pipe").exists()

    def device(tar: tarfile.TarFile) -> None:
        _dir(tar, "workspace")
        null = tarfile.TarInfo("workspace/null")
        null.type, null.devmajor, null.devminor = tarfile.CHRTYPE, 1, 3
        tar.addfile(null)

    with pytest.raises(ArchiveRefused, match="device"):
        extract_into(_stream(device), target, "workspace")


def test_past_the_byte_budget_it_stops(places: tuple[Path, Path]) -> None:
    target, _ = places

    def build(tar: tarfile.TarFile) -> None:
        _dir(tar, "workspace")
        for i in range(4):
            _file(tar, f"workspace/f{i}", b"z" * 400_000)

    with pytest.raises(ArchiveRefused, match="MiB"):
        extract_into(_stream(build), target, "workspace", max_bytes=1 << 20)
