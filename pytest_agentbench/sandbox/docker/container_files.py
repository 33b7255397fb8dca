"""The `Files` port inside a sandbox container, for engines that share no filesystem with us.

On a remote engine the workspace exists only in the engine's volume, so the file tools cannot
open it host-side. `ContainerFiles` runs each operation as one sandbox command: the very code of
the host-side implementation (paths/host_files.py and the modules it imports, sent as source with
the command and loaded under their own names) runs in the container as the command user, against
the workspace there. The confinement guarantees are therefore the same, byte for byte: no
component may be a symlink out of the workspace, only regular files are opened, listings are
bounded walks. Commands run one at a time per sandbox and every process of a command is killed
when it ends, so nothing the agent started can race an operation.

Requests travel in the command's environment (file data base64 in variables of at most
ENV_CHUNK bytes, larger writes staged in pieces under /tmp), answers as one JSON line on stdout;
reads larger than READ_CHUNK come back in pieces. The image needs python3 (the runner image has
it).
"""

from __future__ import annotations

import base64
import errno
import json
import secrets
import shlex
import time
from collections.abc import Callable, Iterable, Iterator
from functools import cache
from importlib import resources
from typing import Any

from pytest_agentbench.paths.deadline import current_deadline
from pytest_agentbench.paths.files import PathEscape
from pytest_agentbench.paths.regular_files import FileTooLarge, NotRegularFile
from pytest_agentbench.paths.walk import Listing
from pytest_agentbench.sandbox.port import ExecResult, SandboxError

Run = Callable[[str, dict[str, str], float], ExecResult]

ENV_CHUNK = 96 * 1024  # base64 characters per variable (a variable may hold 128 KiB at most)
ENV_VARS_PER_COMMAND = 8  # ... so one command carries ~560 KiB of file data
READ_CHUNK = 8 * 1024 * 1024  # raw bytes per answer (11 MiB of base64, under the capture cap)
BATCH_BYTES = 8 * 1024 * 1024  # read_many: raw bytes per answer, at most
REQUEST_PATH_BYTES = 96 * 1024  # read_many: paths per request, JSON-encoded
OP_TIMEOUT_SEC = 120.0  # one operation, when no tool deadline is set
SHIPPED = ("files", "regular_files", "deadline", "globs", "walk", "host_files")

MAIN = r'''
import base64, errno, json, os, sys, time, types
for _pkg in ("pytest_agentbench", "pytest_agentbench.paths"):
    _m = types.ModuleType(_pkg); _m.__path__ = []; sys.modules[_pkg] = _m
for _name, _src in SOURCES:
    _m = types.ModuleType(_name); _m.__file__ = _name; sys.modules[_name] = _m
    exec(compile(_src, _name, "exec"), _m.__dict__)
from pytest_agentbench.paths.host_files import HostFiles
from pytest_agentbench.paths.deadline import host_deadline
from pytest_agentbench.paths.files import PathEscape
from pytest_agentbench.paths.regular_files import FileTooLarge, NotRegularFile

def _data():
    return b"".join(base64.b64decode(os.environ.get("AB_DATA_%d" % i, ""))
                    for i in range(int(os.environ.get("AB_DATA_N", "0"))))

def _stage_path(token):
    if not token.isalnum():
        raise ValueError("bad stage token")
    return "/tmp/.agentbench-stage-" + token

def run(req, files):
    op = req["op"]
    if op == "read":
        data = files.read_bytes(req["path"], req.get("max_bytes"))
        start = req.get("offset", 0)
        return {"data": base64.b64encode(data[start:start + req["chunk"]]).decode(),
                "size": len(data)}
    if op == "read_many":
        out, used = [], 0
        for path in req["paths"]:
            if used >= req["budget"]:
                break
            try:
                data = files.read_bytes(path, req["max_bytes"])
                used += len(data)
                out.append(base64.b64encode(data).decode())
            except Exception as exc:
                out.append({"error": type(exc).__name__})
        return {"items": out}
    if op == "stage":
        flags = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        if req["first"]:
            flags |= os.O_CREAT | os.O_EXCL
        fd = os.open(_stage_path(req["token"]), flags, 0o600)
        try:
            os.write(fd, _data())
        finally:
            os.close(fd)
        return {}
    if op == "write":
        if req.get("token"):
            path = _stage_path(req["token"])
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
            try:
                chunks = []
                while True:
                    chunk = os.read(fd, 1 << 20)
                    if not chunk:
                        break
                    chunks.append(chunk)
            finally:
                os.close(fd)
                os.unlink(path)
            data = b"".join(chunks) + _data()
        else:
            data = _data()
        files.write_bytes(req["path"], data)
        return {}
    if op == "remove":
        files.remove(req["path"])
        return {}
    if op == "exists":
        return {"exists": files.exists(req["path"])}
    if op == "list":
        with host_deadline(req["seconds"]):
            found = files.list(req["root"], req.get("glob"), req["limit"])
        return {"paths": list(found), "incomplete": getattr(found, "incomplete", None)}
    raise ValueError("unknown operation %r" % op)

def main():
    req = json.loads(os.environ["AB_REQ"])
    try:
        answer = {"ok": True, **run(req, HostFiles(req["root_dir"]))}
    except Exception as exc:
        number = getattr(exc, "errno", None)
        answer = {"ok": False, "type": type(exc).__name__, "errno": number,
                  "message": exc.strerror if number is not None and exc.strerror else str(exc),
                  "filename": getattr(exc, "filename", None)}
    sys.stdout.write("\n" + json.dumps(answer) + "\n")

main()
'''


@cache
def helper_command() -> str:
    """The command that runs one operation: python3 with the shipped modules' source."""
    package = resources.files("pytest_agentbench.paths")
    sources = [(f"pytest_agentbench.paths.{name}",
                package.joinpath(f"{name}.py").read_text("utf-8")) for name in SHIPPED]
    program = f"SOURCES = {sources!r}\n{MAIN}"
    return f"command -p python3 -I -S -c {shlex.quote(program)}"


def _raise(answer: dict[str, Any]) -> None:
    kind, message, number = answer.get("type"), str(answer.get("message")), answer.get("errno")
    if kind == "PathEscape":
        raise PathEscape(message)
    if kind == "FileTooLarge":
        raise FileTooLarge(message)
    filename = answer.get("filename")
    if kind == "NotRegularFile":
        raise NotRegularFile(number or errno.EINVAL, message, filename)
    if isinstance(number, int):
        raise OSError(number, message, filename)  # the matching subclass: FileNotFoundError...
    if kind == "IsADirectoryError":
        raise IsADirectoryError(message)
    raise OSError(errno.EIO, f"{kind}: {message}")


def _chunks(data: bytes, size: int) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start:start + size]


class ContainerFiles:
    """`Files` over a sandbox's commands; `run(command, env, timeout)` runs one command there.
    `root` is the workspace's path in the container."""

    def __init__(self, run: Run, root: str) -> None:
        self._run, self.root = run, root

    def _call(self, request: dict[str, Any], data: bytes = b"") -> dict[str, Any]:
        encoded = base64.b64encode(data).decode()
        parts = list(_chunks(encoded.encode(), ENV_CHUNK)) if encoded else []
        env = {"AB_REQ": json.dumps({**request, "root_dir": self.root}),
               "AB_DATA_N": str(len(parts)),
               **{f"AB_DATA_{i}": part.decode() for i, part in enumerate(parts)}}
        deadline = current_deadline()
        timeout = OP_TIMEOUT_SEC
        if deadline is not None:
            timeout = max(1.0, min(timeout, deadline - time.monotonic() + 5.0))
        result = self._run(helper_command(), env, timeout)
        if result.output_lost and _repeatable(request):
            result = self._run(helper_command(), env, timeout)
        lines = (result.full_stdout or result.stdout).strip().splitlines()
        try:
            answer = json.loads(lines[-1]) if lines else None
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            why = ("the image has no python3, which the file tools need on this engine"
                   if result.exit_code == 127 else
                   f"it exited {result.exit_code}{' (timed out)' if result.timed_out else ''}: "
                   f"{result.stderr.strip()[-300:]}")
            raise SandboxError(f"file operation {request['op']} failed in the sandbox: {why}")
        if not answer.get("ok"):
            _raise(answer)
        return answer

    # -- the Files port ---------------------------------------------------------------------------
    def read_bytes(self, path: str, max_bytes: int | None = None) -> bytes:
        pieces: list[bytes] = []
        offset = 0
        while True:
            answer = self._call({"op": "read", "path": path, "max_bytes": max_bytes,
                                 "offset": offset, "chunk": READ_CHUNK})
            piece = base64.b64decode(answer["data"])
            pieces.append(piece)
            offset += len(piece)
            if offset >= int(answer["size"]) or not piece:
                return b"".join(pieces)

    def write_bytes(self, path: str, data: bytes) -> None:
        per_command = ENV_CHUNK * ENV_VARS_PER_COMMAND * 3 // 4
        if len(data) <= per_command:
            self._call({"op": "write", "path": path}, data)
            return
        token = secrets.token_hex(16)
        pieces = list(_chunks(data, per_command))
        for i, piece in enumerate(pieces[:-1]):
            self._call({"op": "stage", "token": token, "first": i == 0}, piece)
        self._call({"op": "write", "path": path, "token": token}, pieces[-1])

    def remove(self, path: str) -> None:
        self._call({"op": "remove", "path": path})

    def exists(self, path: str) -> bool:
        return bool(self._call({"op": "exists", "path": path})["exists"])

    def list(self, root: str = ".", glob: str | None = None, limit: int = 1000) -> list[str]:
        deadline = current_deadline()
        seconds = OP_TIMEOUT_SEC if deadline is None else max(0.0, deadline - time.monotonic())
        answer = self._call({"op": "list", "root": root, "glob": glob, "limit": limit,
                             "seconds": seconds})
        found = Listing(answer["paths"])
        found.incomplete = answer.get("incomplete")
        return found

    def read_many(self, paths: Iterable[str], max_bytes: int) -> Iterator[tuple[str, bytes | None]]:
        """(path, bytes) for each path in order, None for one that cannot be read (an escape, a
        FIFO, gone): a search's reads, a batch per command instead of a command per file."""
        pending = list(paths)
        while pending:
            batch: list[str] = []
            size = 0
            for path in pending[:2000]:  # one variable holds 128 KiB at most: JSON-sized
                size += len(json.dumps(path)) + 2
                if batch and size > REQUEST_PATH_BYTES:
                    break
                batch.append(path)
            answer = self._call({"op": "read_many", "paths": batch,
                                 "max_bytes": max_bytes, "budget": BATCH_BYTES})
            items = answer["items"]
            if not items:
                raise SandboxError("read_many made no progress")
            for path, item in zip(pending, items, strict=False):
                yield path, base64.b64decode(item) if isinstance(item, str) else None
            del pending[:len(items)]


def _repeatable(request: dict[str, Any]) -> bool:
    """Whether running the operation twice does what running it once does (the answer of the
    first run was lost, not its effect)."""
    return request["op"] in ("read", "read_many", "exists", "list") or (
        request["op"] == "write" and "token" not in request)
