"""`agentbench doctor --engine SPEC`: one line per engine of the pool, and `agentbench gc` on each.

The line says `engine <name>: reachable (Docker <version>, API <v>, <ncpu> CPUs), runner image
<hash> present|transferred|missing, transfer bind|archive, isolation ok|<problem>`. The runner
image is copied from the controller's engine (`default`) when missing; the transfer mode is what
`shares_filesystem` finds (or what the spec forces, checked); isolation is a short-lived
container under the sandbox policy with no host directory at all, where the command user must
not be root, must hold no capability, and must reach no network.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pytest_agentbench.sandbox.docker.engines import (
    EngineSpec,
    EngineUnreachable,
    connect,
    engine_info,
    shares_filesystem,
)
from pytest_agentbench.sandbox.docker.image import DEFAULT_IMAGE, ImageUnavailable
from pytest_agentbench.sandbox.docker.image_transfer import ensure_image_on

PROBE = ("id -u; grep CapEff /proc/self/status | cut -f2; "
         "python3 -c 'import socket; socket.create_connection((\"1.1.1.1\", 53), timeout=3)' "
         "2>/dev/null && echo net=open || echo net=closed")


def check_engine(spec: EngineSpec, source: Any | None, probe_root: Path,
                 transfer_image: bool = True) -> tuple[bool, str]:
    """(ok, the line's detail) for one engine; never raises for the engine's own faults."""
    try:
        client = connect(spec, timeout=30)
    except EngineUnreachable as exc:
        return False, f"unreachable ({exc.why})"
    except ValueError as exc:  # cannot be addressed as asked (no TLS, no such context, ...)
        return False, f"unusable ({str(exc).removeprefix(f'engine {spec.name}: ')})"
    try:
        info = engine_info(client)
        parts = [f"reachable (Docker {info['version']}, API {info['api_version']}, "
                 f"{info['ncpu']} CPUs)"]
        image, image_part = _image(client, source if transfer_image else None, transfer_image)
        parts.append(image_part)
        transfer_ok, transfer_part = _transfer(spec, client, probe_root, image)
        parts.append(transfer_part)
        problem = isolation_problem(client, image) if image else "not checked (no runner image)"
        parts.append(f"isolation {problem or 'ok'}")
        return bool(image) and transfer_ok and problem is None, ", ".join(parts)
    except Exception as exc:  # noqa: BLE001 - the engine broke mid-check: one line, no traceback
        return False, f"check failed: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    finally:
        client.close()


def _image(client: Any, source: Any | None, may_copy: bool) -> tuple[str | None, str]:
    try:
        found = ensure_image_on(client, DEFAULT_IMAGE, source)
    except ImageUnavailable as exc:
        why = exc if may_copy else "not copied from the default engine: --no-build"
        return None, f"runner image missing ({why})"
    how = found["how"]
    if how == "transferred":
        how += f" in {found['seconds']:.0f}s ({found['bytes'] / 1e6:.0f} MB)"
    return str(found["id"]), f"runner image {found['context_hash'] or found['id'][:19]} {how}"


def _transfer(spec: EngineSpec, client: Any, probe_root: Path,
              image: str | None) -> tuple[bool, str]:
    if spec.transfer == "archive":
        return True, "transfer archive"
    start = time.monotonic()
    shared = shares_filesystem(client, probe_root, image)
    took = f"probe {time.monotonic() - start:.2f}s"
    if spec.transfer == "bind" and not shared:
        return False, f"transfer bind impossible: the engine does not see {probe_root} ({took})"
    return True, f"transfer {'bind' if shared else 'archive'} ({took})"


def isolation_problem(client: Any, image: str) -> str | None:
    """None when a container under the sandbox policy (read-only root, no capabilities, no
    network, the command user not root) holds; else what is wrong, in a few words."""
    import pytest_agentbench.sandbox.docker.exec_stream as exec_stream
    import pytest_agentbench.sandbox.docker.policy as policy
    from pytest_agentbench.sandbox.port import SandboxSpec

    spec = SandboxSpec(image=image, workspace=Path("/nonexistent"), env_dir=Path("/nonexistent"),
                       lifetime_sec=120, labels={"agentbench.doctor": "1"})
    args = policy.create_args(spec, policy.SANDBOX_UID, policy.SANDBOX_GID, "none")
    args["mounts"] = []  # no host directory: the check must hold on an engine that sees none
    args.pop("working_dir", None)
    try:
        container = client.containers.create(**args)
    except Exception as exc:  # noqa: BLE001 - engines without --ipc=none
        if "ipc" not in str(exc).lower():
            raise
        container = client.containers.create(**{**args, "ipc_mode": "private"})
    try:
        container.start()
        user = f"{policy.SANDBOX_UID}:{policy.SANDBOX_GID}"
        exec_id = client.api.exec_create(container.id, ["bash", "-c", PROBE], user=user)["Id"]
        output = exec_stream.output(client.api, exec_id)  # docker-py's exec_run can lose it
        code = exec_stream.exit_code(client.api, exec_id)
        words = output.decode(errors="replace").split()
        if code != 0 or len(words) != 3:
            return f"probe failed (exit {code}: {' '.join(words)[:120]})"
        uid, cap, net = words
        problems = ([f"runs as root ({uid})"] if uid == "0" else []) + (
            [f"holds capabilities {cap}"] if cap != "0" * 16 else []) + (
            ["reached the network"] if net != "net=closed" else [])
        return "; ".join(problems) or None
    finally:
        container.remove(force=True, v=True)


def gc_engine(spec: EngineSpec, older_than_sec: float | None, force: bool = False,
              labels: dict[str, str] | None = None) -> str:
    """Remove leftover agentbench containers, then the agentbench volumes that no container uses
    (caches, `agentbench.cache`, are kept), on one engine; neither a container nor a volume of a
    live run (its creator alive, or another process of its run: docker.containers.in_use)
    unless `force`. `labels` narrows it to what carries them. The summary line
    (EngineUnreachable/ValueError when it cannot be reached)."""
    from pytest_agentbench.sandbox.docker.factory import DockerSandboxFactory

    client = connect(spec, timeout=30)
    try:
        before = _volume_names(client, labels)
        removed, live = DockerSandboxFactory(client).gc(older_than_sec, force, labels)
        _, kept = _gc_volumes(client, older_than_sec, force, labels)
        gone = len(before - _volume_names(client, labels))
    finally:
        client.close()
    kept = {"live run's container": live, **kept}
    why = ", ".join(f"{n} {what}" for what, n in kept.items() if n)
    return (f"engine {spec.name}: removed {removed} container(s), {gone} volume(s)"
            + (f" (kept: {why})" if why else ""))


def _label_filter(labels: dict[str, str] | None) -> list[str]:
    return [f"{k}={v}" for k, v in sorted({**(labels or {}), "agentbench": "1"}.items())]


def _volume_names(client: Any, labels: dict[str, str] | None = None) -> set[str]:
    volumes = client.api.volumes(filters={"label": _label_filter(labels)}).get("Volumes") or []
    return {str(volume["Name"]) for volume in volumes}


def _gc_volumes(client: Any, older_than_sec: float | None, force: bool = False,
                labels: dict[str, str] | None = None) -> tuple[int, dict[str, int]]:
    from docker.errors import APIError, NotFound

    from pytest_agentbench.sandbox.docker.containers import in_use, live_runs

    cutoff = None if older_than_sec is None else time.time() - older_than_sec
    volumes = client.api.volumes(filters={"label": _label_filter(labels)}).get("Volumes") or []
    # a run is live while any process of it lives: its containers' owners count too
    live = set() if force else live_runs(
        [*(client.api.volumes(filters={"label": "agentbench=1"}).get("Volumes") or []),
         *client.api.containers(all=True, filters={"label": "agentbench=1"})])
    gone, kept = 0, {"cache": 0, "in use": 0, "too new": 0}
    for volume in volumes:
        name, labels_of = volume["Name"], volume.get("Labels") or {}
        if "agentbench.cache" in labels_of:
            kept["cache"] += 1
        elif cutoff is not None and _created(volume) > cutoff:
            kept["too new"] += 1
        elif (not force and in_use({"Labels": labels_of}, live)) or client.api.containers(
                all=True, filters={"volume": name}):
            kept["in use"] += 1
        else:
            try:
                client.api.remove_volume(name)
                gone += 1
            except NotFound:
                pass
            except APIError as exc:  # taken by a container created since the listing
                if exc.status_code != 409:
                    raise
                kept["in use"] += 1
    return gone, kept


def _created(volume: dict[str, Any]) -> float:
    from datetime import datetime

    try:
        return datetime.fromisoformat(str(volume.get("CreatedAt"))).timestamp()
    except ValueError:
        return 0.0


def default_probe_root() -> Path:
    """Where runs keep their work directories (run/hostenv.work_root's parent): what a bind
    mount would have to reach."""
    from pytest_agentbench.run.hostenv import work_root

    return work_root("doctor").parent
