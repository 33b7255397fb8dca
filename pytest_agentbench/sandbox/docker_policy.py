"""The Docker sandbox policy: how a container is created, and how each command is bounded.

Policy (spec §6, improvement 5): non-root user, no capabilities, no-new-privileges, pids/cpu/memory
limits without swap, read-only root with tmpfs /tmp and home, no network unless the spec asks for
it, nothing from the host but the workspace, the env dir, an optional pip cache and an optional CA
bundle (read-only). PID 1 is docker-init reaping zombies around `sleep <lifetime>`, a dead-man's
switch. Containers are labelled `agentbench=1`, `agentbench.owner` and the spec's labels.

docker-py's exec has no timeout, so every command runs under the WRAPPER below (`timeout -k 2`,
then every process of the command is killed, so background jobs never outlive it); KILL_SCRIPT
kills one command's processes from outside when the host stops waiting for it.
"""

from __future__ import annotations

import math
import os
import socket
from collections.abc import Mapping
from typing import Any

from docker.types import Mount

from pytest_agentbench.core.ports import SandboxSpec
from pytest_agentbench.sandbox import local

BASE_LABEL = "agentbench"
OWNER_LABEL = "agentbench.owner"  # <host>:<pid> of the process that created the container
HOME = "/home/runner"
CA_PATH = "/etc/ssl/certs/ca-certificates.crt"
MARKER_VAR = "AGENTBENCH_EXEC_ID"
TMPFS = {
    "/tmp": "rw,exec,nosuid,nodev,size=512m,mode=1777",
    "/dev/shm": "rw,noexec,nosuid,nodev,size=64m,mode=1777",
}

# reap SIG: send SIG to every process whose environment carries this exec's marker ($MARK).
REAP = r"""reap() {
  local d p v e
  for d in /proc/[0-9]*; do
    p=${d#/proc/}; [ "$p" = "$$" ] && continue
    mapfile -d '' -t e 2>/dev/null < "$d/environ" || continue
    for v in "${e[@]}"; do
      [ "$v" = "AGENTBENCH_EXEC_ID=$MARK" ] && { kill -"$1" "$p" 2>/dev/null; break; }
    done
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
# $1 = budget in seconds, $2 = the command. Job control gives the command its own process group
# without ignoring SIGINT (as plain `&` would); the last stderr line is a trailer for the host.
WRAPPER = (
    "exec 3>&2 2>/dev/null\nMARK=$AGENTBENCH_EXEC_ID\n" + REAP + OOM_COUNT + r"""oomc; o0=$o
set -m
timeout -k 2 "$1" bash -c "$2" 2>&3 3>&- & t=$!
wait "$t"; rc=$?
kill -KILL -- "-$t"
reap STOP; reap STOP; reap KILL; reap KILL
oomc
printf '\n\036agentbench-end:%s %s %s %s\n' "$MARK" "$rc" "$o0" "$o" >&3
exit "$rc"
""")
KILL_SCRIPT = REAP + "reap STOP; reap STOP; reap KILL; reap KILL; exit 0\n"


def owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def sandbox_user() -> tuple[int, int]:
    """1000:1000 when the harness is root; otherwise the host user, so the mounts are writable."""
    if not hasattr(os, "geteuid") or os.geteuid() == 0:
        return 1000, 1000
    return os.getuid(), os.getgid()


def create_args(spec: SandboxSpec, uid: int, gid: int, ipc_mode: str) -> dict[str, Any]:
    """The keyword arguments for `containers.create` that implement the sandbox policy."""
    env = {"HOME": HOME, **local.DETERMINISTIC_ENV}
    mounts = [Mount(spec.workdir, str(spec.workspace), type="bind"),
              Mount("/env", str(spec.env_dir), type="bind", read_only=spec.env_read_only)]
    if spec.pip_cache is not None:
        mounts.append(Mount(f"{HOME}/.cache/pip", str(spec.pip_cache), type="bind"))
    if spec.ca_bundle is not None:
        mounts.append(Mount(CA_PATH, str(spec.ca_bundle), type="bind", read_only=True))
        env.update(SSL_CERT_FILE=CA_PATH, REQUESTS_CA_BUNDLE=CA_PATH, PIP_CERT=CA_PATH,
                   GIT_SSL_CAINFO=CA_PATH)
    env.update(spec.env)
    mem = f"{spec.mem_limit_mb}m"
    return {
        "image": spec.image, "command": ["sleep", str(math.ceil(spec.lifetime_sec))],
        "init": True, "hostname": "sandbox", "user": f"{uid}:{gid}", "working_dir": spec.workdir,
        "environment": env, "labels": {**spec.labels, BASE_LABEL: "1", OWNER_LABEL: owner()},
        "cap_drop": ["ALL"], "security_opt": ["no-new-privileges"], "privileged": False,
        "read_only": True, "mounts": mounts,
        "tmpfs": {**TMPFS, HOME: f"rw,exec,nosuid,nodev,size=256m,uid={uid},gid={gid},mode=0700"},
        "ipc_mode": ipc_mode, "pids_limit": spec.pids_limit,
        "nano_cpus": int(spec.cpu_limit * 1e9), "mem_limit": mem, "memswap_limit": mem,
        "network_mode": "bridge" if spec.network else "none", "auto_remove": False,
    }


def sanitized(args: Mapping[str, Any], spec: SandboxSpec) -> dict[str, Any]:
    """Create arguments for the record: host paths become their roles, secrets are redacted."""
    roles = {str(spec.workspace): "<workspace>", str(spec.env_dir): "<env_dir>",
             str(spec.pip_cache): "<pip_cache>", str(spec.ca_bundle): "<ca_bundle>"}
    out = {k: v for k, v in args.items() if k not in ("mounts", "environment")}
    out["environment"] = local.redact_env(args["environment"])
    out["mounts"] = [{"target": m["Target"], "source": roles.get(m["Source"], "<host>"),
                      "read_only": bool(m.get("ReadOnly"))} for m in args["mounts"]]
    return out
