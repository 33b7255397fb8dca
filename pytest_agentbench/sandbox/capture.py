"""What both sandbox adapters share about one command: the environment it starts with, the
capture of its output into an ExecResult, and the facts probe.

`OutputBuffer` keeps a bounded head and tail of each stream, `build_result` applies the
truncation policy; `DETERMINISTIC_ENV` is every command's runtime envelope; `FACTS_SCRIPT` and
`parse_facts` read the sandbox's OS facts; `KILL_GRACE_SEC` is the TERM-to-KILL grace of both;
`redact_env` hides secret-looking values for the record.
Importing this module does not import docker-py.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping

from pytest_agentbench.sandbox.port import ExecResult
from pytest_agentbench.text.truncation import decode, truncate

#: The deterministic runtime envelope of every command.
DETERMINISTIC_ENV: dict[str, str] = {
    "PYTHONHASHSEED": "0",
    "TZ": "UTC",
    "LC_ALL": "C.UTF-8",
    "LANG": "C.UTF-8",
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
}
KILL_GRACE_SEC = 2.0  # SIGTERM first, SIGKILL this much later (`timeout -k 2`)
CAPTURE_CAP = 4 * 1024 * 1024  # bytes kept at each end of a stream when only a summary is wanted
FULL_CAPTURE_CAP = 64 * 1024 * 1024  # ... and when full logs were asked for
FACTS_SCRIPT = "; ".join(
    f"echo '@@{key}'; {cmd} 2>&1"
    for key, cmd in [
        ("uname", "uname -a"), ("python", "python -VV"), ("pip", "python -m pip --version"),
        ("pytest", "python -m pytest --version"), ("git", "git --version"),
    ]
)


class OutputBuffer:
    """Collects one stream: all of it up to `cap` bytes, then a rolling tail of `cap` bytes.

    Lines and bytes are counted over everything, so the totals stay right when the middle of a
    runaway stream is dropped (truncation would drop it anyway).
    """

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_size = 0
        self.total_bytes = 0
        self.newlines = 0
        self.last_byte = b""
        self.dropped = 0

    def append(self, data: bytes) -> None:
        if not data:
            return
        self.total_bytes += len(data)
        self.newlines += data.count(b"\n")
        self.last_byte = data[-1:]
        room = self.cap - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail.append(data)
            self.tail_size += len(data)
            while self.tail_size - len(self.tail[0]) >= self.cap:
                self.dropped += len(self.tail[0])
                self.tail_size -= len(self.tail.popleft())

    def data(self) -> bytes:
        tail = b"".join(self.tail)
        if self.dropped:
            tail = tail[-self.cap:]
            marker = f"\n[... agentbench: {self.dropped} bytes not captured ...]\n"
            return bytes(self.head) + marker.encode() + tail
        return bytes(self.head) + tail

    def total_lines(self) -> int:
        if not self.total_bytes:
            return 0
        return self.newlines + (0 if self.last_byte == b"\n" else 1)

    def pop_trailer(self, prefix: bytes, window: int = 512) -> bytes | None:
        """Remove and return the final `prefix...` line if the stream ends with one within its
        last `window` bytes."""
        tail = b"".join(self.tail)
        end = (bytes(self.head[-window:]) + tail)[-window:]
        at = end.rfind(prefix)
        if at < 0 or not end.endswith(b"\n") or b"\n" in end[at + len(prefix):-1]:
            return None
        trailer = end[at:]
        cut = len(trailer)
        if len(tail) >= cut:
            tail = tail[: len(tail) - cut]
        else:
            del self.head[len(self.head) - (cut - len(tail)):]
            tail = b""
        self.tail = deque([tail]) if tail else deque()
        self.tail_size = len(tail)
        self.total_bytes -= cut
        self.newlines -= trailer.count(b"\n")
        self.last_byte = (tail or bytes(self.head[-1:]))[-1:]
        return trailer


def build_result(
    exit_code: int, out: OutputBuffer, err: OutputBuffer, duration_ms: int, *,
    timed_out: bool, oom_killed: bool, full_logs: bool, disk_limit_exceeded: bool = False,
    output_lost: bool = False,
) -> ExecResult:
    """Apply the truncation policy to both streams and fill the ExecResult flags."""
    out_text, err_text = decode(out.data()), decode(err.data())
    out_t, err_t = truncate(out_text), truncate(err_text)
    kept = out_t if out_t.truncated or not err_t.truncated else err_t
    return ExecResult(
        exit_code=exit_code, stdout=out_t.text, stderr=err_t.text, duration_ms=duration_ms,
        timed_out=timed_out, oom_killed=oom_killed, disk_limit_exceeded=disk_limit_exceeded,
        stdout_truncated=out_t.truncated, stderr_truncated=err_t.truncated,
        stdout_total_lines=out.total_lines(), stderr_total_lines=err.total_lines(),
        kept_head_lines=kept.kept_head_lines, kept_tail_lines=kept.kept_tail_lines,
        full_stdout=out_text if full_logs else None,
        full_stderr=err_text if full_logs else None, output_lost=output_lost,
    )


def parse_facts(text: str) -> dict[str, str]:
    """Split the output of FACTS_SCRIPT into {key: first line of output}."""
    facts: dict[str, str] = {}
    key = None
    for line in text.splitlines():
        if line.startswith("@@"):
            key = line[2:]
            facts[key] = ""
        elif key is not None and not facts[key]:
            facts[key] = line.strip()
    return facts


def secret_like(key: str) -> bool:
    upper = key.upper()
    return any(word in upper for word in ("TOKEN", "SECRET", "PASSWORD", "KEY", "AUTH"))


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: ("***" if secret_like(k) else v) for k, v in sorted(env.items())}
