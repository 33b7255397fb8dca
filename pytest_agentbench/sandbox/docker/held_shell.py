"""One wrapper shell held open per sandbox: the commands after the first pay no exec.

A Docker exec costs 50-65 ms of engine work (runc starts a process in the container's
namespaces) before its command runs; a `run` step of an agent loop is mostly that. The held shell
is the command wrapper (policy.WRAPPER) run once, under the image's execute-only shell, reading one
request after another from its stdin (the exec's attached stream, sandbox/docker/exec_stream):
each request is what a one-shot exec's argv and environment would have been, and its answer is
what that exec's stdout and stderr would have held, the same trailer (carrying the request's
nonce) last, so the host reads both alike (sandbox.py).

What makes a held shell as trustworthy as a fresh one:
- It runs only under the execute-only shell: it is not dumpable, so the command user can neither
  ptrace it nor open its /proc files (its memory, environment, fds, stdin): the nonces it holds
  are secret and the answers on its stdout are its own.
- It is the caller of every reap (`kill -KILL -1` spares only the caller): after each command,
  and before the next request is read, nothing the command started is alive, so nothing can
  write into the next answer or read the next request.
- Per-request state is local to one function call (its variables, the request's environment
  as `local -x`); RLIMIT_FSIZE is set in the children only (the shell's own hard limit could not
  be raised again): the command's child sets it and then becomes `timeout` (exec, by the path
  `command -p` found), so the command's process tree is a one-shot wrapper's (bash, timeout,
  the shell that reaps).
- Each command writes to the shell's pipes through open file descriptions of its own (START):
  the flags it sets there (O_NONBLOCK, O_ASYNC with a signal of its choice) end with it, and
  never reach the descriptions the shell writes its marks through.
- What a process of the same user can still do to it: signal it (killed: the host sees no
  trailer, reaps and starts another; stopped: a request not taken within the host's
  HELD_GO_SEC gets the user's processes SIGCONT, and the shell goes on), and change what the
  kernel lets the same uid change in another process and what the shell passes on to later
  commands: its resource limits (prlimit(2)) and its scheduling (nice, policy, CPU affinity,
  I/O priority). Before each request the shell compares those, and the flags of its own pipe
  descriptions, with what it started with and refuses the request when anything differs: the
  host runs that request in an exec of its own (fresh pipes, fresh limits), and the next one
  starts a new held shell.
- A request whose environment names a variable the shell itself reads (IFS, BASH*, SHELLOPTS,
  the locale, ...) or any non-upper-case name goes to a one-shot exec (`takes`).

The host sends a header line (the nonce, the byte length of each of the wrapper's 8 arguments,
of the working directory and of each `NAME=value` of the environment) and then those bytes; the
shell reads each with `read -N` in the C locale (bytes, not characters). It answers on stdout
with GO_MARK and the nonce once it has the request, what the command printed, then OUT_MARK
and the nonce; on stderr with what a one-shot
wrapper prints there, the trailer last. Or, before running anything, REFUSE_MARK and the nonce
on stdout, and it exits.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from pytest_agentbench.sandbox.capture import OutputBuffer
from pytest_agentbench.sandbox.disk import MEASURE
from pytest_agentbench.sandbox.docker import exec_stream, policy
from pytest_agentbench.sandbox.docker.containers import DockerErrors
from pytest_agentbench.sandbox.docker.exec_stream import STDOUT, ExecStream

OUT_MARK = b"\n\x1eagentbench-out:"
REFUSE_MARK = b"\x1eagentbench-refuse:"
GO_MARK = b"\x1eagentbench-go:"
# Names a request's environment may hold to go through the held shell: upper case, and none the
# shell reads for itself (a one-shot exec's bash would take them from its environment at start).
_NAME = re.compile(r"[A-Z_][A-Z0-9_]*\Z")
# (bash's manual, "Shell Variables", less those it only passes on: PATH, HOME, TMPDIR, TZ, ...)
_SHELL_NAMES = frozenset({
    "IFS", "SHELLOPTS", "POSIXLY_CORRECT", "EPOCHREALTIME", "EPOCHSECONDS", "SECONDS", "RANDOM",
    "SRANDOM", "LINENO", "OPTIND", "OPTARG", "OPTERR", "PPID", "UID", "EUID", "GROUPS", "PWD",
    "OLDPWD", "CDPATH", "GLOBIGNORE", "GLOBSORT", "TMOUT", "PS0", "PS1", "PS2", "PS3", "PS4",
    "HOSTNAME", "HOSTTYPE", "MACHTYPE", "OSTYPE", "SHLVL", "FUNCNAME", "FUNCNEST", "CHILD_MAX",
    "PIPESTATUS", "DIRSTACK", "HISTCMD", "HISTFILE", "HISTSIZE", "HISTFILESIZE", "HISTCONTROL",
    "HISTIGNORE", "HISTTIMEFORMAT", "HOSTFILE", "ENV", "LANG", "TEXTDOMAIN", "TEXTDOMAINDIR",
    "FIGNORE", "EXECIGNORE", "INPUTRC", "PROMPT_COMMAND", "PROMPT_DIRTRIM", "TIMEFORMAT",
    "IGNOREEOF", "MAIL", "MAILCHECK", "MAILPATH", "COLUMNS", "LINES", "REPLY", "SHELL",
    "COPROC", "COMPREPLY", "EMACS", "INSIDE_EMACS", "FCEDIT",
})


def takes(env: Mapping[str, str], args: Iterable[str] = ()) -> bool:
    """Whether a request with this environment and these arguments may go through the held shell
    (`read -N` would drop a NUL byte: an exec of its own refuses such an argument at once)."""
    names = all(_NAME.match(k) and k not in _SHELL_NAMES
                and not k.startswith(("BASH", "LC_", "COMP_", "READLINE_", "HIST")) for k in env)
    return names and all(_bytes_ok(v) for v in (*env.values(), *args))


def _bytes_ok(text: str) -> bool:
    """No NUL, and UTF-8 (a lone surrogate from a model's JSON: an exec of its own has the
    engine put U+FFFD in its place)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return "\0" not in text


def request_bytes(nonce: str, args: list[str], workdir: str, env: Mapping[str, str]) -> bytes:
    """One request: the header line and the fields' bytes."""
    fields = [a.encode() for a in args] + [workdir.encode()] + [
        f"{k}={v}".encode() for k, v in env.items()]
    header = " ".join([nonce, *(str(len(f)) for f in fields)]) + "\n"
    return header.encode() + b"".join(fields)


# The command's child: the file-size limit; stdout and stderr opened anew on the shell's pipes
# (/proc/self/fd: open file descriptions of the command's own, so the flags it sets on them,
# O_NONBLOCK or O_ASYNC, are not the shell's and are gone with it); then `timeout` itself (no
# shell left between them).
START = ('{ fsz "$3"; exec 1>/proc/self/fd/1 2>/proc/self/fd/3 3>&- || exit 125; '
         'exec "$tmo" -k 2 "$1" bash -c "$2"; } </dev/null')


def _request_function() -> str:
    """WRAPPER as a function of the held shell (see the module docstring for what changed)."""
    fsz = 'fsz "$3"; '
    prologue = policy.PROLOGUE.replace("b=$(if ", "b=$(" + fsz + "if ", 1)
    epilogue = policy.EPILOGUE.replace("e=$(set -o pipefail; ", "e=$(set -o pipefail; " + fsz, 1)
    assert prologue != policy.PROLOGUE and epilogue != policy.EPILOGUE
    return (
        r"""request() {
  local n=$9 x c k rc m o o0 t a b r u l f e d s i
  [ "${#envs[@]}" = 0 ] || local -x "${envs[@]}"
  reap
  oomc; o0=$o
  x=; [ -n "$6$7" ] && x=${!AGENTBENCH_EXCL_*} && [ -n "$x" ] && export -n $x
""" + prologue + r"""rc=0 m=0
  if [ -z "$k" ]; then
    [ -n "$c" ] && c=$EPOCHREALTIME$'\n'$c
""" + policy.TIMED.replace("START", START) + r"""  fi
  reap
  oomc
""" + epilogue + r"""d=$4
""" + MEASURE + policy.COLLECT + r"""printf '\n\036agentbench-out:%s\n' "$n"
  printf '\n\036agentbench-end:%s %s %s %s %s %s\n' "$n" "$rc" "$o0" "$o" "$s" "$m" >&3
}
""")


# The held shell. Its own stderr goes nowhere (fd 3 is the exec's stderr, for the commands and
# the trailers); job control gives each command its own process group, as in WRAPPER.
SCRIPT = (
    "exec 3>&2 2>/dev/null\n" + policy.REAP + policy.OOM_COUNT
    + r"""fsz() { [ -z "$1" ] || ulimit -f "$1"; }
set -m
tmo=$(command -p -v timeout) && [ -n "$tmo" ] || exit 1
ion=$(command -p -v ionice) || ion=
# what another process of this user can change in this shell and what it passes on: resource
# limits, the flags of the pipes its children write to (O_NONBLOCK, O_ASYNC), scheduling
# (priority, nice, policy, CPU affinity; I/O priority by ionice when the image has it)
state() {
  local k v f a
  mapfile -t a < /proc/self/limits; S="${a[*]}"
  for f in 1 3; do
    while read -r k v; do [ "$k" = flags: ] && S+=" $f:$v"; done < /proc/self/fdinfo/$f
  done
  read -r v < /proc/self/stat; v=${v##*) }; set -f; f=($v); set +f
  S+=" ${f[15]} ${f[16]} ${f[37]} ${f[38]}"
  mapfile -t a < /proc/self/status
  for k in "${a[@]}"; do [[ $k == Cpus_allowed_list:* ]] && S+=" $k"; done
  [ -z "$ion" ] || S+=" $("$ion" -p $$ 2>&1)"
}
state; S0=$S
""" + _request_function() + r"""while TMOUT=0 IFS= read -r h; do
  set -f; L=($h); set +f
  [ "${#L[@]}" -ge 10 ] || exit 1
  a=()
  for ((i = 1; i < ${#L[@]}; i++)); do
    [[ ${L[i]} =~ ^[0-9]+$ ]] && LC_ALL=C TMOUT=0 IFS= read -r -N "${L[i]}" v || exit 1
    a+=("$v")
  done
  envs=("${a[@]:9}")
  state
  if [ "$S" != "$S0" ] || ! cd -P -- "${a[8]}"; then
    printf '\036agentbench-refuse:%s\n' "${L[0]}"; exit 1
  fi
  unset OLDPWD
  printf '\036agentbench-go:%s\n' "${L[0]}"
  request "${a[@]:0:8}" "${L[0]}"
done
""")


class HeldShell:
    """The held shell's exec: its stream, and one request's answer read at a time."""

    def __init__(self, stream: ExecStream, exec_id: str) -> None:
        self.exec_id = exec_id  # its exit status, when a request's answer has no trailer
        self._stream = stream
        self._frames: Iterator[tuple[int, bytes]] = stream.frames()
        self.requests = 0  # answered in full
        # the shell took the request (its GO mark came); cleared by the caller before it sends
        self.went = threading.Event()

    @classmethod
    def start(cls, api: Any, container_id: str, shell: str, user: str) -> HeldShell | None:
        """The held shell started in the container as `user`; None when the engine refused."""
        try:
            exec_id = api.exec_create(container_id, [shell, "-p", "-c", SCRIPT, "agentbench"],
                                      user=user, workdir="/", stdin=True)["Id"]
            return cls(exec_stream.start(api, exec_id), exec_id)
        except DockerErrors:
            return None

    def exchange(self, request: bytes, nonce: str, out: OutputBuffer, err: OutputBuffer,
                 errors: list[BaseException], outcome: list[str]) -> None:
        """A reader thread's work: send `request`, then its answer into the buffers. `outcome`
        gets "done" (both ends seen), "refused" or "unsent" (nothing ran: run it elsewhere),
        or "ended" (the shell ended while the request ran)."""
        try:
            self._stream.sendall(request)
        except OSError:  # the shell's stdin is gone: it ended before it could read the request
            outcome.append("unsent")
            return
        try:
            outcome.append(self._answer(nonce.encode(), out, err))
        except Exception as exc:  # noqa: BLE001 - reported by the waiting thread
            errors.append(exc)
            outcome.append("ended")

    def _answer(self, nonce: bytes, out: OutputBuffer, err: OutputBuffer) -> str:
        head_len = len(GO_MARK) + len(nonce) + 1
        stdout = _Cut(OUT_MARK + nonce + b"\n")
        stderr = _Cut(policy.TRAILER + nonce, through_newline=True)
        head = b""
        for kind, chunk in self._frames:
            if kind != STDOUT:
                if stderr.feed(chunk, err):
                    raise OSError("the held shell wrote past its trailer")
            elif len(head) < head_len:
                head += chunk
                if len(head) < head_len:
                    continue
                head, chunk = head[:head_len], head[head_len:]
                if head.startswith(REFUSE_MARK):
                    return "refused"
                if head != GO_MARK + nonce + b"\n":
                    raise OSError(f"the held shell answered another request: {head[:60]!r}")
                self.went.set()
                if stdout.feed(chunk, out):
                    raise OSError("the held shell wrote past its end mark")
            elif stdout.feed(chunk, out):
                raise OSError("the held shell wrote past its end mark")
            if stdout.done and stderr.done:
                self.requests += 1
                return "done"
        stdout.flush(out)
        stderr.flush(err)
        if not head:
            return "unsent"
        # a part of a GO mark: the shell took the request
        return "refused" if head.startswith(REFUSE_MARK) else "ended"

    def close(self) -> None:
        self._stream.close()


class _Cut:
    """One stream of an answer, up to a mark: everything before it goes to the buffer (the mark
    too, through the end of its line, when `through_newline`: the trailer, read as a one-shot
    exec's); a tail as long as the mark is held back until it cannot be its start."""

    def __init__(self, mark: bytes, through_newline: bool = False) -> None:
        self.mark, self.through_newline = mark, through_newline
        self.held = b""
        self.done = False

    def feed(self, chunk: bytes, buffer: OutputBuffer) -> bool:
        """Take a chunk; True when bytes came after the mark (a broken protocol)."""
        if self.done:
            return bool(chunk)
        data = self.held + chunk
        at = data.find(self.mark)
        if at >= 0 and self.through_newline:
            end = data.find(b"\n", at + len(self.mark))
            if end < 0:  # the trailer's line is not whole yet
                buffer.append(data[:at])
                self.held = data[at:]
                return False
            buffer.append(data[: end + 1])
            self.held, self.done = b"", True
            return bool(data[end + 1 :])
        if at >= 0:
            buffer.append(data[:at])
            self.held, self.done = b"", True
            return bool(data[at + len(self.mark) :])
        keep = len(self.mark) - 1
        buffer.append(data[: max(len(data) - keep, 0)])
        self.held = data[max(len(data) - keep, 0) :]
        return False

    def flush(self, buffer: OutputBuffer) -> None:
        buffer.append(self.held)
        self.held = b""
