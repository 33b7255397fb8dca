"""`agentbench doctor`: prove this machine can run sandboxes, one `PASS|FAIL <check>: <detail>` line
per check. Returns 0 only when every check passes.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pytest_agentbench.sandbox.docker.engine_spec import EngineSpec, parse_engine

MIN_FREE_BYTES = 5 * 1024**3
EGRESS_PROBE = ("python3 -c 'import socket; "
                "socket.create_connection((\"1.1.1.1\", 53), timeout=3)'")


class Report:
    def __init__(self, write: Callable[[str], None]) -> None:
        self.write = write
        self.failed = 0

    def __call__(self, ok: bool, check: str, detail: str) -> bool:
        self.failed += not ok
        self.write(f"{'PASS' if ok else 'FAIL'} {check}: {detail}")
        return ok


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "agentbench"


def run_doctor(build: bool = True, write: Callable[[str], None] | None = None,
               engines: Sequence[EngineSpec] | None = None) -> int:
    """Today's checks of the local engine when `default` is among `engines` (the default), then
    one `engine <name>` line per engine (doctor_engines.py)."""
    report = Report(write or (lambda line: print(line, flush=True)))
    specs = list(engines) if engines else [parse_engine("default")]
    local_ok = True
    if any(spec.endpoint == "default" for spec in specs):
        local_ok = _local_checks(report, build)
    _check_engines(report, specs, local_ok, build)
    return 1 if report.failed else 0


def _local_checks(report: Report, build: bool) -> bool:
    """The checks of the controller's own engine; False when its daemon does not answer."""
    from pytest_agentbench.sandbox.docker.containers import docker_host
    from pytest_agentbench.sandbox.docker.factory import DockerSandboxFactory
    from pytest_agentbench.sandbox.port import SandboxError

    factory = DockerSandboxFactory(_client_or_none())
    try:
        version = factory.engine_facts()["version"]
    except SandboxError:
        report(False, "docker daemon", f"not reachable at {docker_host()} (start Docker, or set "
               "DOCKER_HOST; in a checkout of pytest-agentbench, scripts/ensure-docker starts it)")
        return False
    report(True, "docker daemon", f"{version} at {docker_host()}")
    image = _check_image(report, build)
    _check_disk(report, factory.client.info().get("DockerRootDir"))
    if image:
        _check_sandbox(report, factory, image)
        _check_hello_task(report, factory, image)
    _check_leftovers(report, factory)
    _report_env_cache(report)
    return True


def _check_engines(report: Report, specs: list[EngineSpec], local_ok: bool, build: bool) -> None:
    """One line per engine; the runner image comes from the default engine when one lacks it
    (not with --no-build). The default engine's line is left out when its daemon check failed
    (that line already says why)."""
    from pytest_agentbench.cli.doctor_engines import check_engine, default_probe_root
    from pytest_agentbench.sandbox.docker.engines import EngineUnreachable, connect

    source = None
    if local_ok and build and any(spec.endpoint != "default" for spec in specs):
        try:
            source = connect(parse_engine("default"), timeout=30)
        except (EngineUnreachable, ValueError):
            source = None
    try:
        for spec in specs:
            if spec.endpoint == "default" and not local_ok:
                continue
            ok, detail = check_engine(spec, source, default_probe_root(), transfer_image=build)
            report(ok, f"engine {spec.name}", detail)
    finally:
        if source is not None:
            source.close()


def _report_env_cache(report: Report) -> None:
    """The environment cache's footprint (informational: `agentbench cache prune` shrinks it)."""
    from pytest_agentbench.run.envcaches import format_size, open_env_cache

    try:
        cache = open_env_cache(None, None, "$AGENTBENCH_ENV_CACHE_MAX_SIZE")
    except ValueError as exc:
        report(False, "env cache", str(exc))
        return
    if cache is None:
        report(True, "env cache", "disabled ($AGENTBENCH_ENV_CACHE=none)")
        return
    entries, size = cache.footprint()
    cap = cache.max_bytes or 0
    over = " (over the cap: entries in use at the last prune)" if size > cap else ""
    report(True, "env cache", f"{entries} entries, {format_size(size)} of {format_size(cap)}"
           f"{over} at {cache.root} (`agentbench cache ls|prune`)")


def _check_hello_task(report: Report, factory: Any, image: str) -> None:
    from pytest_agentbench.cli.doctor_task import hello_task
    from pytest_agentbench.run.hostenv import owner_uid

    try:
        ok, detail = hello_task(factory, image, owner_uid("docker"))
    except Exception as exc:  # noqa: BLE001 - one line, whatever broke
        ok, detail = False, f"{type(exc).__name__}: {exc}"
    report(ok, "hello task end to end", detail)


def _client_or_none() -> Any:
    try:
        import docker

        return docker.from_env(timeout=15)
    except Exception:  # noqa: BLE001 - reported by the daemon check
        return None


def _check_image(report: Report, build: bool) -> str | None:
    from pytest_agentbench.sandbox.docker.image import DEFAULT_IMAGE, ensure_image, inspect_image

    try:
        if build:
            info = ensure_image(quiet=True)
            how = f"built in {info.seconds:.0f}s from {info.base}" if info.built else "present"
            report(True, "runner image", f"{info.name} {info.image_id[:19]} ({how})")
            return info.name
        found = inspect_image(DEFAULT_IMAGE)
    except Exception as exc:  # noqa: BLE001 - any build failure is this check's failure
        report(False, "runner image", f"{DEFAULT_IMAGE}: {exc}")
        return None
    if found is None:
        report(False, "runner image", f"{DEFAULT_IMAGE} missing (run without --no-build)")
        return None
    report(True, "runner image", f"{DEFAULT_IMAGE} {str(found['id'])[:19]} (present)")
    return DEFAULT_IMAGE


def _check_disk(report: Report, docker_root: str | None) -> None:
    places = [("cache", cache_root())]
    if docker_root:
        places.append(("docker root", Path(docker_root)))
    for name, path in places:
        probe = path
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        if name == "docker root" and probe != path:
            report(True, f"disk space ({name})", f"{path} is not on this machine (remote engine)")
            continue
        free = shutil.disk_usage(probe).free
        report(free >= MIN_FREE_BYTES, f"disk space ({name})",
               f"{free / 1024**3:.1f} GB free at {path} (need >= {MIN_FREE_BYTES // 1024**3} GB)")


def _check_sandbox(report: Report, factory: Any, image: str) -> None:
    from pytest_agentbench.sandbox.port import SandboxError, SandboxSpec

    with tempfile.TemporaryDirectory(prefix="agentbench-doctor-") as tmp:
        workspace = Path(tmp) / "workspace"
        workspace.mkdir()
        spec = SandboxSpec(image=image, workspace=workspace, env_dir=Path(tmp) / "env",
                           lifetime_sec=300, labels={"agentbench.doctor": "1"})
        start = time.monotonic()
        try:
            sandbox = factory.open(spec)
        except SandboxError as exc:
            report(False, "sandbox", f"cannot start: {exc}")
            return
        try:
            started = time.monotonic() - start
            probe = sandbox.exec("id -u; grep CapEff /proc/self/status", timeout_sec=60)
            lines = probe.stdout.split()
            uid, cap = (lines[0], lines[-1]) if len(lines) == 3 else ("?", "?")
            report(probe.ok and uid.isdigit() and uid != "0" and cap == "0" * 16, "sandbox",
                   f"started in {started:.2f}s as uid {uid}, CapEff {cap}")
            egress = sandbox.exec(EGRESS_PROBE, timeout_sec=30)
            dns = sandbox.exec("getent hosts deb.debian.org", timeout_sec=30)
            report(egress.exit_code != 0 and dns.exit_code != 0, "network isolation",
                   "egress and DNS from a network=none sandbox fail, as they must"
                   if egress.exit_code != 0 and dns.exit_code != 0 else
                   f"a network=none sandbox reached the network (connect exit "
                   f"{egress.exit_code}, DNS exit {dns.exit_code})")
        except SandboxError as exc:
            report(False, "sandbox", f"exec failed: {exc}")
        finally:
            sandbox.close()


def _check_leftovers(report: Report, factory: Any) -> None:
    """Containers of dead runs are leftovers; those of live runs (their creator alive, or
    another process of their run: docker.containers.in_use) are in use, whoever runs them."""
    from pytest_agentbench.sandbox.docker.containers import in_use as of_live_run
    from pytest_agentbench.sandbox.docker.containers import live_runs

    found = factory.containers({})
    live = live_runs(found)
    in_use = sum(of_live_run(info, live) for info in found)
    leftover = len(found) - in_use
    report(leftover == 0, "leftover containers",
           f"{leftover} leftover, {in_use} in use by live runs"
           + (" (remove them with `agentbench gc`)" if leftover else ""))

