"""The file tools on an engine that shares no filesystem (sandbox/docker/container_files.py) behave
as they do host-side (paths/host_files.py): the same workspace, shipped to a sandbox through the
archive API, answers every operation exactly as the host copy does: the same bytes, the same
listing, the same refusal (type) for escapes, FIFOs, directories and missing files. Writes and
removals are compared on two copies of one tree. Large files cross the command-size limits (staged
writes, chunked reads) intact."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.paths.deadline import host_deadline
from pytest_agentbench.paths.host_files import HostFiles
from pytest_agentbench.sandbox.docker.container_files import ENV_CHUNK, READ_CHUNK
from pytest_agentbench.sandbox.port import Sandbox
from tests.support.sandboxes import open_labelled, small_spec

NAMES = ["plain.txt", "sub/dir/deep.py", "with space.txt", "unicode-é.txt", "bin.dat",
         "link-in", "dirlink-in/deep.py", "link-out", "dirlink-out/passwd", "dangling",
         "fifo", "sub", "missing", "../escape", "/etc/passwd", "sub/../plain.txt", ".git/config",
         "loop"]


def _tree(root: Path) -> None:
    (root / "sub" / "dir").mkdir(parents=True)
    (root / "plain.txt").write_text("plain\n")
    (root / "sub" / "dir" / "deep.py").write_text("X = 1\n")
    (root / "with space.txt").write_text("space\n")
    (root / "unicode-é.txt").write_text("é\n")
    (root / "bin.dat").write_bytes(bytes(range(256)) * 3)
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    os.symlink("plain.txt", root / "link-in")
    os.symlink("sub/dir", root / "dirlink-in")
    os.symlink("/etc/hostname", root / "link-out")
    os.symlink("/etc", root / "dirlink-out")
    os.symlink("nowhere", root / "dangling")
    os.symlink("loop", root / "loop")
    os.mkfifo(root / "fifo")


def _outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    try:
        value = call()
    except Exception as exc:  # noqa: BLE001 - the type is the contract
        return "error", type(exc).__name__
    if isinstance(value, list):
        return "ok", sorted(value)
    return "ok", value


@pytest.fixture
def pair(docker_sandboxes: Any, tmp_path: Path) -> Iterator[tuple[HostFiles, Sandbox, Path]]:
    from pytest_agentbench.sandbox.docker.factory import DockerSandboxFactory

    archive = DockerSandboxFactory(docker_sandboxes.client, transfer="archive")
    spec = small_spec(tmp_path)
    host_copy = tmp_path / "host"
    for root in (spec.workspace, host_copy):
        root.mkdir(exist_ok=True)
        _tree(root)
    with open_labelled(archive, spec) as make:
        yield HostFiles(host_copy), make(), host_copy


def test_reads_listings_and_refusals_match_the_host(pair: Any) -> None:
    host, sandbox, _ = pair
    remote = sandbox.files
    differ = []
    for name in NAMES:
        for op, call in [
            ("read", lambda f, n=name: f.read_bytes(n)),
            ("read10", lambda f, n=name: f.read_bytes(n, max_bytes=10)),
            ("exists", lambda f, n=name: f.exists(n)),
            ("list", lambda f, n=name: f.list(n)),
        ]:
            here, there = _outcome(lambda c=call: c(host)), _outcome(lambda c=call: c(remote))
            if here != there:
                differ.append((op, name, here, there))
    for glob, limit in [(None, 1000), ("*.py", 1000), ("**/*.txt", 1000), (None, 2)]:
        here = _outcome(lambda g=glob, lim=limit: host.list(".", g, lim))
        there = _outcome(lambda g=glob, lim=limit: remote.list(".", g, lim))
        if here != there:
            differ.append(("list.", glob, here, there))
    assert not differ, differ
    batch = dict(remote.read_many(NAMES, 1000))
    for name in NAMES:
        kind, value = _outcome(lambda n=name: host.read_bytes(n, 1000))
        assert batch[name] == (value if kind == "ok" else None), name


def test_writes_and_removals_match_the_host(pair: Any) -> None:
    host, sandbox, host_root = pair
    remote = sandbox.files
    differ = []
    for op, name in [("write", "plain.txt"), ("write", "new/nested/file.txt"),
                     ("write", "link-in"), ("write", "link-out"), ("write", "dirlink-out/x"),
                     ("write", "fifo"), ("write", "sub"), ("write", "../x"),
                     ("remove", "with space.txt"), ("remove", "link-out"), ("remove", "sub"),
                     ("remove", "missing"), ("remove", "dirlink-out/passwd")]:
        data = f"{op} {name}\n".encode()
        call: Callable[[Any], Any] = ((lambda f, n=name, d=data: f.write_bytes(n, d))
                                     if op == "write" else (lambda f, n=name: f.remove(n)))
        here, there = _outcome(lambda c=call: c(host)), _outcome(lambda c=call: c(remote))
        if here != there:
            differ.append((op, name, here, there))
    assert not differ, differ
    with host_deadline(60):
        names = host.list(".", None, 1000)
        assert names == remote.list(".", None, 1000)
    for name in names:
        assert _outcome(lambda n=name: host.read_bytes(n)) == \
            _outcome(lambda n=name: remote.read_bytes(n)), name
    result = sandbox.exec("stat -c '%U %a' new/nested/file.txt plain.txt", timeout_sec=30)
    modes = [f"{os.stat(host_root / n).st_mode & 0o777:o}" for n in ("new/nested/file.txt",
                                                                      "plain.txt")]
    assert result.stdout.split("\n")[:2] == [f"agentbench {m}" for m in modes]


def test_large_files_cross_the_command_limits_intact(pair: Any) -> None:
    _, sandbox, _ = pair
    remote = sandbox.files
    big = os.urandom(ENV_CHUNK * 20 + 12345)  # several staged pieces
    remote.write_bytes("big.bin", big)
    assert remote.read_bytes("big.bin") == big
    made = sandbox.exec(f"head -c {READ_CHUNK * 2 + 777} /dev/urandom > huge.bin && "
                        "sha256sum huge.bin", timeout_sec=60)
    assert made.ok, made.stderr
    data = remote.read_bytes("huge.bin")  # three answers
    assert len(data) == READ_CHUNK * 2 + 777
    assert hashlib.sha256(data).hexdigest() == made.stdout.split()[0]
    assert remote.read_bytes("huge.bin", max_bytes=5) == data[:5]
    leftovers = sandbox.exec("ls -A /tmp | grep -c agentbench-stage || true", timeout_sec=30)
    assert leftovers.stdout.strip() == "0"


def test_a_search_over_many_long_paths_reads_them_all(pair: Any) -> None:
    """One request carries at most ~96 KiB of paths (an environment variable holds 128 KiB):
    2,400 files of ~90-character paths were one 'argument list too long' (cold review)."""
    _, sandbox, _ = pair
    made = sandbox.exec(
        "python3 -c \"import os\n"
        "for i in range(2400):\n"
        "    d = 'deep/' + 'x' * 60 + '/' + str(i % 10)\n"
        "    os.makedirs(d, exist_ok=True)\n"
        "    open(d + '/file-%05d-é.py' % i, 'w').write(str(i))\"", timeout_sec=120)
    assert made.ok, made.stderr
    names = sandbox.files.list("deep", None, 5000)
    assert len(names) == 2400
    got = dict(sandbox.files.read_many(names, 100))
    assert len(got) == 2400 and all(data is not None for data in got.values())
    for name, data in got.items():
        assert data == str(int(name.split("file-")[1][:5])).encode(), name
