"""What a second Docker daemon could break on the host, and the `docker` CLI helper the second
daemon's helpers share.

`HostState.now()` takes the host's links (docker0 above all), iptables rules and forwarding, and
the main daemon's identity, networks and runner image; `HostGuard(before).check()` asserts none
of it changed (tests/support/dockerd.py says why a second dockerd can break each of them).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_agentbench.sandbox.docker.image import DEFAULT_IMAGE


def docker(*args: str, host: str | None = None, timeout: float = 60,
           env: dict[str, str] | None = None) -> str:
    """`docker ARGS` (on `host` if given, else DOCKER_HOST or the current context); its stdout,
    or RuntimeError with its stderr."""
    full = {**os.environ, **(env or {}), **({"DOCKER_HOST": host} if host else {})}
    out = subprocess.run(["docker", *args], env=full, capture_output=True, text=True,
                         timeout=timeout)
    if out.returncode:
        raise RuntimeError(f"docker {' '.join(args)}: {out.stderr.strip()}")
    return out.stdout


def containers(run_id: str, host: str | None = None) -> list[str]:
    """Ids of the agentbench containers of run `run_id` on `host` (default: the main engine)."""
    out = docker("ps", "-aq", "--filter", "label=agentbench=1",
                 "--filter", f"label=agentbench.run_id={run_id}", host=host)
    return out.split()


def _ip_json(*args: str) -> list[dict[str, Any]]:
    out = subprocess.run(["ip", "-j", *args], capture_output=True, text=True, timeout=20)
    return json.loads(out.stdout or "[]") if out.returncode == 0 else []


def _lines(*cmd: str) -> list[str]:
    if not shutil.which(cmd[0]):
        return []
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    return out.stdout.splitlines() if out.returncode == 0 else [f"{cmd}: {out.stderr.strip()}"]


Link = tuple[int, bool, tuple[tuple[str, str, int], ...]]  # ifindex, up, addresses


@dataclass(frozen=True)
class HostState:
    """What a second daemon could break for the main one: the host's links (docker0 above all),
    its iptables rules and forwarding, and the main daemon's identity, networks and runner image.
    Other tests run alongside (pytest -n 2): their sandboxes with network add veth links and take
    them away again, so veth links are left out; nothing of theirs removes an iptables rule."""

    links: dict[str, Link]
    ip_forward: str
    iptables: frozenset[str]
    daemon: str
    networks: tuple[str, ...]
    image: bool

    @classmethod
    def now(cls) -> HostState:
        links: dict[str, Link] = {}
        for link in _ip_json("addr", "show"):
            name = str(link["ifname"])
            if not name.startswith("veth"):
                addrs = tuple(sorted((str(a["family"]), str(a["local"]), int(a["prefixlen"]))
                                     for a in link.get("addr_info", [])))
                links[name] = (int(link["ifindex"]), "UP" in link["flags"], addrs)
        return cls(
            links=links,
            ip_forward=Path("/proc/sys/net/ipv4/ip_forward").read_text().strip(),
            iptables=frozenset(_lines("iptables", "-S") + _lines("iptables", "-t", "nat", "-S")),
            daemon=docker("info", "--format", "{{.ID}}", timeout=20).strip(),
            networks=tuple(sorted(docker("network", "ls", "-q", "--no-trunc").split())),
            image=docker("images", "-q", DEFAULT_IMAGE).strip() != "",  # rebuilt or not: there
        )


@dataclass
class HostGuard:
    """The host and the main daemon, as they were before the second daemon started."""

    before: HostState

    def check(self, run_id: str | None = None) -> None:
        after = HostState.now()
        assert after.links.get("docker0") == self.before.links.get("docker0"), (
            f"docker0 of the main daemon: {self.before.links.get('docker0')} -> "
            f"{after.links.get('docker0')}")
        for key in ("links", "ip_forward", "daemon", "networks", "image"):
            old, new = getattr(self.before, key), getattr(after, key)
            assert new == old, f"{key} of the host or the main daemon: {old} -> {new}"
        removed = self.before.iptables - after.iptables
        assert not removed, f"iptables rules of the main daemon removed: {sorted(removed)}"
        if run_id is not None:  # the run went to the second daemon, never to the main one
            assert not containers(run_id), "the run created containers on the main daemon"
