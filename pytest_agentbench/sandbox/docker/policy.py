"""The Docker sandbox policy: how a container is created, and how each command is bounded.

Policy: commands run as a non-root user (SANDBOX_UID, or the host user)
with no capabilities and no-new-privileges; pids/cpu/memory limits without swap, read-only root with
tmpfs /tmp and home, no network unless the spec asks for it, nothing from the host but the
workspace, the env dir, an optional pip cache and an optional CA bundle (read-only). PID 1 is
docker-init reaping zombies around `sleep <lifetime>`, a dead-man's switch; both run as uid 0
without capabilities, so no command (another uid, no CAP_KILL) can signal them: `kill -9 -1` or
`kill 1` from a command cannot take the sandbox down. Containers are labelled `agentbench=1`,
`agentbench.owner` and the spec's labels.

Every command runs under WRAPPER (`timeout -k 2`, then every process of the command's uid in
the container is killed: nothing a command starts outlives it, whatever it does). The wrapper runs
under the image's execute-only shell (pytest_agentbench/runner/Dockerfile) when it has one, so
the commands cannot ptrace it or read its environment; its trailer (exit status, OOM counters)
carries a nonce that only the wrapper and the host know. The exit status is the trailer's under
that shell, else the engine's (exec_inspect): never a line the command could have printed.
"""

from __future__ import annotations

import math
import os
import socket
from collections.abc import Mapping
from typing import Any

from docker.types import Mount

from pytest_agentbench.sandbox.capture import DETERMINISTIC_ENV, redact_env
from pytest_agentbench.sandbox.disk import MEASURE
from pytest_agentbench.sandbox.port import (  # the protocol's limits (port.EpilogueRunning)
    COLLECT_MAX_BYTES,
    PROLOGUE_MAX_BLOCK,
    SCRIPT_MAX_SEC,
    SandboxSpec,
)

BASE_LABEL = "agentbench"
OWNER_LABEL = "agentbench.owner"  # <host>:<pid> of the process that created the container
SHELL_LABEL = "agentbench.private_shell"  # the image's execute-only bash, if it has one
HOME = "/home/runner"  # the image user's home (a tmpfs in the sandbox)
# The runner image's user `agentbench` (the package's runner/Dockerfile says why this uid): a uid
# of the harness's own, no person's (login.defs' 1000-59999) and no system package's (Debian's
# 60000-64999, systemd's dynamic 61184-65519, 65534), below where subuid ranges start (100000).
# run/hostenv.SANDBOX_UID is the same number (kept apart so the run layer need not import docker).
SANDBOX_UID = SANDBOX_GID = 70000
CA_PATH = "/etc/ssl/certs/ca-certificates.crt"
KEEPER_USER = "0:0"  # PID 1 and its sleep; commands never run as this user
NONCE_VAR = "AGENTBENCH_NONCE"
TRAILER = b"\n\x1eagentbench-end:"
TMPFS = {
    "/tmp": "rw,exec,nosuid,nodev,size=512m,mode=1777",
    "/dev/shm": "rw,noexec,nosuid,nodev,size=64m,mode=1777",
}

# reap: SIGKILL every process of this uid in the container but the caller (kill(2) with pid -1;
# the builtin, so the caller is this shell). The kernel delivers it to a forking parent's new
# child too; STOP, setsid, double forks, `env -i`, nohup and ignored signals change nothing.
REAP = r"""reap() {
  local i
  for i in 1 2 3 4 5 6 7 8; do
    kill -KILL -1 2>/dev/null || return 0
    wait 2>/dev/null
  done
}
"""
# oomc: $o := the cgroup's oom_kill counter (v1 memory.oom_control or v2 memory.events).
OOM_COUNT = r"""oomc() {
  local f k v; o=
  for f in /sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events; do
    [ -r "$f" ] || continue
    while read -r k v; do [ "$k" = oom_kill ] && o=$v; done < "$f"
    break
  done
}
"""
# $1 = budget in seconds, $2 = the command, $3 = RLIMIT_FSIZE in KiB or "", $4 = the workspace to
# measure (disk.MEASURE, archive engines' disk bound) or "", $5 = a file to read back after the
# command (COLLECT: a results file, read as a separate command would read it) or "", $6 a script to
# run after it (EPILOGUE) or "", $7 a script to run before it (PROLOGUE) or "", $8 "1" to run those
# two inline (below) or "". The nonce leaves the environment before anything runs. First the
# leftovers of an earlier command die (defence in depth: the host reaps too). Job control gives the
# command its own process group without ignoring SIGINT (as plain `&` would). After it, nothing but
# builtins run (no fork needed, even with the pids limit reached) but MEASURE's du when $4 is set
# (its failure reads as "-") and COLLECT's head and base64 when $5 is set (a failure reads as "-":
# the host reads the file with a command of its own then), and the trailer is the last thing on the
# stream. COLLECT: after the command and everything it started are gone, the file $5 on one line of
# its own before the trailer, nonce first: "." no regular file there (a symlink counts as none), "+"
# and its first COLLECT_MAX_BYTES + 1 bytes in base64 (more than COLLECT_MAX_BYTES: the host reads
# it with a command of its own), "-" it could not be read.
FILE_MARK = b"\n\x1eagentbench-file:"
COLLECT = r"""if [ -n "$5" ]; then
  if [ -L "$5" ] || [ ! -f "$5" ]; then f=.
  else
    f=$(set -o pipefail; command -p head -c """ + str(COLLECT_MAX_BYTES + 1) + r""" -- "$5" |
        command -p base64 -w0) && f=+$f || f=-
  fi
  printf '\n\036agentbench-file:%s %s\n' "$n" "$f" >&3
fi
"""
# EPILOGUE: a harness script $6 (or "") run after the command and everything it started are gone,
# as the command user in the command's directory, bounded by EPILOGUE_MAX_SEC, its stdin empty and
# its stderr dropped; then its leftovers reaped. With a script, the environment it reads that the
# command must not see (the snapshot's AGENTBENCH_EXCL_* chunks) is exported to it alone. Its
# stdout on one line of its own before the COLLECT line, nonce first: "+" and the stdout in base64
# when it exited 0, "-" otherwise. The host reads it only when the line fits EPILOGUE_MAX_BYTES
# (else it runs the script by itself). With $8 set, the epilogue and the prologue below run
# inline: in a subshell of the wrapper (the same non-dumpable shell), with no process started for
# them and no bound of their own, the host's deadline for the exec bounding them; for the
# harness's per-step snapshots (a few milliseconds each, which until then ran inside the
# command's own budget). Else each runs in a bash of its own, bounded by its MAX_SEC.
EPILOGUE_MAX_SEC = SCRIPT_MAX_SEC
EPILOGUE_MARK = b"\n\x1eagentbench-epilogue:"
EPILOGUE = r"""if [ -n "$6" ] && [ -z "$k" ]; then
  [ -n "$x" ] && export $x
  e=$(set -o pipefail; if [ -n "$8" ]; then (export AGENTBENCH_CHAIN=$c; eval "$6")
      else AGENTBENCH_CHAIN=$c command -p timeout -k 1 EMAX bash -c "$6"; fi \
      2>/dev/null </dev/null | command -p base64 -w0) && e=+$e || e=-
  reap
  printf '\n\036agentbench-epilogue:%s %s\n' "$n" "$e" >&3
fi
""".replace("EMAX", str(EPILOGUE_MAX_SEC))
# PROLOGUE: a harness script $7 (or "") run before the command, once every earlier process is gone,
# as the command user in the command's directory, bounded by PROLOGUE_MAX_SEC (unless inline: see
# EPILOGUE), its stdin empty and its stderr dropped, with the environment the command must not see;
# then its leftovers reaped. Its stdout goes first on the exec's stdout as one block
# (port.PROLOGUE_MARK, its length and time), before the command starts, so nothing the command
# prints comes before or inside it, whether or not the wrapper can be read. When it failed or said
# more than port.PROLOGUE_MAX_BLOCK, a deferral instead (with its output after its fourth line if it
# exited 0) and neither the command nor the epilogue runs ($k). Its first line and the lines after
# its third (a snapshot's tree, END line and fingerprint) stay in the wrapper's memory as $c, and
# the time the command starts before them, which the epilogue alone gets as AGENTBENCH_CHAIN: out of
# the command's reach under the execute- only shell. (Lines are split by IFS on a substituted
# separator: bash's own `${b#*$'\n'}` is quadratic, 90 ms on a 12 kB block.)
PROLOGUE_MAX_SEC = SCRIPT_MAX_SEC
PROLOGUE = r"""c= k=
if [ -n "$7" ]; then
  [ -n "$x" ] && export $x
  t=$EPOCHREALTIME
  b=$(if [ -n "$8" ]; then (eval "$7"); else command -p timeout -k 1 PMAX bash -c "$7"; fi \
      2>/dev/null </dev/null)
  r=$?
  reap
  u=$(( ${EPOCHREALTIME//[!0-9]/} - ${t//[!0-9]/} )); [ "$u" -ge 0 ] || u=0
  [ -n "$x" ] && export -n $x
  set -f; IFS=$'\037'; l=(${b//$'\n'/$'\037'}); unset IFS; set +f
  if [ "$r" = 0 ] && [ "${#b}" -le MAXB ]; then
    printf '\036agentbench-fold:%s %s\n%s\n' "${#b}" "$u" "$b"
    c=${l[0]}; for ((i = 3; i < ${#l[@]}; i++)); do c+=$'\n'${l[i]}; done
  else
    k=1 f=; [ "$r" = 0 ] && for ((i = 4; i < ${#l[@]}; i++)); do f+=${l[i]}$'\n'; done
    printf '\036agentbench-fold:defer %s %s\n%s\n' "$r" "$u" "${f%$'\n'}"
  fi
  unset b l f
fi
""".replace("MAXB", str(PROLOGUE_MAX_BLOCK)).replace("PMAX", str(PROLOGUE_MAX_SEC))
# The command started in the background (START) and waited for, with its own time in
# microseconds on the boot clock (no wall-clock step moves it), or "-", in $m.
TIMED = r"""  read -r m _ < /proc/uptime || m=
  START & t=$!
  wait "$t"; rc=$?
  read -r u _ < /proc/uptime || u=
  if [[ $m =~ ^[0-9]+\.[0-9]{2}$ && $u =~ ^[0-9]+\.[0-9]{2}$ ]]; then
    m=$(( (10#${u//./} - 10#${m//./}) * 10000 ))
  else m=-; fi
"""
WRAPPER = (
    "exec 3>&2 2>/dev/null\nn=$" + NONCE_VAR + "; unset " + NONCE_VAR + "\n" + REAP + OOM_COUNT
    + r"""reap
oomc; o0=$o
[ -n "$3" ] && ulimit -f "$3"
x=; [ -n "$6$7" ] && x=${!AGENTBENCH_EXCL_*} && [ -n "$x" ] && export -n $x
""" + PROLOGUE + r"""rc=0 m=0
if [ -z "$k" ]; then
  set -m
  [ -n "$c" ] && c=$EPOCHREALTIME$'\n'$c  # the chain starts with when the command did
""" + TIMED.replace("START", 'command -p timeout -k 2 "$1" bash -c "$2" 2>&3 3>&-') + r"""fi
reap
oomc
""" + EPILOGUE + r"""d=$4
""" + MEASURE + COLLECT
    + r"""printf '\n\036agentbench-end:%s %s %s %s %s %s\n' "$n" "$rc" "$o0" "$o" "$s" "$m" >&3
exit "$rc"
""")
KILL_SCRIPT = REAP + "reap; exit 0\n"


def owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def sandbox_user() -> tuple[int, int]:
    """The image's user when the harness is root; otherwise the host user, so the mounts are
    writable by the sandbox and the harness alike."""
    if not hasattr(os, "geteuid") or os.geteuid() == 0:
        return SANDBOX_UID, SANDBOX_GID
    return os.getuid(), os.getgid()


def parse_trailer(trailer: bytes | None, nonce: str) -> tuple[int, bool, float | None] | None:
    """(exit code the wrapper saw, OOM kill during the command, the command's own time in
    seconds or None) from a trailer carrying `nonce`."""
    if trailer is None:
        return None
    fields = trailer.decode(errors="replace").strip("\n\x1e").split(" ")
    if (len(fields) not in (4, 5, 6) or fields[0] != f"agentbench-end:{nonce}"
            or not fields[1].isdigit()):
        return None
    before, after = fields[2], fields[3]
    own = int(fields[5]) / 1e6 if len(fields) == 6 and fields[5].isdigit() else None
    return (int(fields[1]), before.isdigit() and after.isdigit() and int(after) > int(before),
            own)


def bind_mounts(spec: SandboxSpec) -> list[Mount]:
    """The host directories of the spec, bind-mounted (an engine that sees our filesystem)."""
    mounts = [Mount(spec.workdir, str(spec.workspace), type="bind"),
              Mount("/env", str(spec.env_dir), type="bind", read_only=spec.env_read_only)]
    if spec.pip_cache is not None:
        mounts.append(Mount(f"{HOME}/.cache/pip", str(spec.pip_cache), type="bind"))
    if spec.ca_bundle is not None:
        mounts.append(Mount(CA_PATH, str(spec.ca_bundle), type="bind", read_only=True))
    mounts += [Mount(m.target, str(m.host), type="bind", read_only=True)
               for m in spec.extra_mounts]
    return mounts


def labels(spec: SandboxSpec) -> dict[str, str]:
    """What every container and volume of this sandbox carries (sweeps and gc find them)."""
    return {**spec.labels, BASE_LABEL: "1", OWNER_LABEL: owner()}


def create_args(spec: SandboxSpec, uid: int, gid: int, ipc_mode: str,
                mounts: list[Mount] | None = None) -> dict[str, Any]:
    """The keyword arguments for `containers.create` that implement the sandbox policy. The
    container's own user is KEEPER_USER; every exec names the command user (`uid:gid`).
    `mounts`: the volumes standing in for the spec's host directories (sandbox/shipped_mounts),
    or None to bind-mount the directories themselves."""
    env = {"HOME": HOME, **DETERMINISTIC_ENV}
    mounts = bind_mounts(spec) if mounts is None else mounts
    if spec.ca_bundle is not None:
        env.update(SSL_CERT_FILE=CA_PATH, REQUESTS_CA_BUNDLE=CA_PATH, PIP_CERT=CA_PATH,
                   GIT_SSL_CAINFO=CA_PATH)
    env.update({m.env: m.target for m in spec.extra_mounts})
    env.update(spec.env)
    mem = f"{spec.mem_limit_mb}m"
    return {
        "image": spec.image, "command": ["sleep", str(math.ceil(spec.lifetime_sec))],
        "init": True, "hostname": "sandbox", "user": KEEPER_USER, "working_dir": spec.workdir,
        "environment": env, "labels": labels(spec),
        "cap_drop": ["ALL"], "security_opt": ["no-new-privileges"], "privileged": False,
        "read_only": True, "mounts": mounts,
        "tmpfs": {**TMPFS, HOME: f"rw,exec,nosuid,nodev,size=256m,uid={uid},gid={gid},mode=0700"},
        "ipc_mode": ipc_mode, "pids_limit": spec.pids_limit,
        "nano_cpus": int(spec.cpu_limit * 1e9), "mem_limit": mem, "memswap_limit": mem,
        "network_mode": "bridge" if spec.network else "none", "auto_remove": False,
    }


def sanitized(args: Mapping[str, Any], spec: SandboxSpec,
              volumes: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Create arguments for the record: host paths (and the volumes standing in for them)
    become their roles, secrets are redacted."""
    roles = {str(spec.workspace): "<workspace>", str(spec.env_dir): "<env_dir>",
             str(spec.pip_cache): "<pip_cache>", str(spec.ca_bundle): "<ca_bundle>",
             **{str(m.host): f"<{m.env}>" for m in spec.extra_mounts},
             **(volumes or {})}
    out = {k: v for k, v in args.items() if k not in ("mounts", "environment")}
    out["environment"] = redact_env(args["environment"])
    out["mounts"] = [{"target": m["Target"], "type": m.get("Type"),
                      "source": roles.get(m["Source"], "<host>"),
                      "read_only": bool(m.get("ReadOnly"))} for m in args["mounts"]]
    return out

