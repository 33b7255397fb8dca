"""The run's engines, resolved once on the controller before any attempt: each engine reached,
the run's image put on it (streamed from the controller's engine and checked by content), the
workspace transfer decided (bind when its containers see our directories, else archive), and
its slots counted. The result (`EnginePlan`s, run/engine_pool.py) travels to the workers.

With no `--agentbench-engine`, the run has one engine, `default`, exactly as before: no probe,
unbounded slots, bind mounts (unless DOCKER_HOST names a tcp:// or ssh:// engine: then it is
probed like any other).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_agentbench.run.engine_pool import EnginePlan
from pytest_agentbench.sandbox.docker.image import ImageUnavailable, RunnerImage

Facts = list[dict[str, Any]]


def plan_engines(texts: tuple[str, ...], image: RunnerImage, probe_root: Path,
                 log: Callable[[str], None] | None = None) -> tuple[list[EnginePlan], Facts]:
    """The plans, and one fact dict per engine for run.json (version, image, transfer, how
    long the checks took). ImageUnavailable (one line) when an engine cannot be used."""
    from pytest_agentbench.sandbox.docker.engine_spec import redact_url
    from pytest_agentbench.sandbox.docker.engines import (
        EngineUnreachable,
        connect,
        default_slots,
        engine_info,
        parse_engine,
        shares_filesystem,
    )
    from pytest_agentbench.sandbox.docker.image_transfer import ensure_image_on

    if not texts and _local_default():
        return [EnginePlan("default", "default", None, "bind")], []
    specs = [parse_engine(text) for text in (texts or ("default",))]
    source = None
    plans, facts = [], []
    for spec in specs:
        started = time.monotonic()
        try:
            client = connect(spec)
        except (EngineUnreachable, ValueError) as exc:  # the spec as given, its password left out
            shown = redact_url(spec.endpoint)
            # the engine the user named: a bad option (exit 4), as a missing --agentbench-image
            raise ImageUnavailable(f"--agentbench-engine {shown}: {exc}", usage=True) from None
        info = engine_info(client)
        if source is None:
            source = _source_client()
        try:
            placed = ensure_image_on(client, image.name, source=source)
        except ImageUnavailable as exc:
            raise ImageUnavailable(f"engine {spec.name}: {exc}") from None
        if image.id and placed.get("id") != image.id:
            # the same context built there on its own: not the same bytes (unpinned packages),
            # and env snapshots are keyed by the run's image: every engine runs the run's own
            placed = {**placed, "how": _send_image(source, client, image.id, spec.name)}
        transfer = spec.transfer
        if transfer == "auto":
            transfer = "bind" if shares_filesystem(client, probe_root, image.ref) else "archive"
        slots = spec.slots if spec.slots is not None else (
            default_slots(info) if len(specs) > 1 or texts else None)
        plans.append(EnginePlan(spec.name, spec.endpoint, slots, transfer, spec.allow_plaintext))
        fact = {"name": spec.name, "version": info.get("version"), "ncpu": info.get("ncpu"),
                "slots": slots, "transfer": transfer, "image": placed.get("how"),
                "image_sec": placed.get("seconds"),
                "check_sec": round(time.monotonic() - started, 3)}
        facts.append(fact)
        if log is not None:
            log(f"engine {spec.name}: Docker {info.get('version')}, {info.get('ncpu')} CPUs, "
                f"{slots or 'unbounded'} slots, transfer {transfer}, runner image "
                f"{placed.get('how')}")
        client.close()
    if source is not None:
        source.close()
    return plans, facts


def _send_image(source: Any, client: Any, image_id: str, engine: str) -> str:
    """Stream the run's image (by id) from the controller's engine onto `engine`."""
    from docker.errors import DockerException

    try:
        client.api.load_image(source.api.get_image(image_id, chunk_size=1 << 20))
        client.api.inspect_image(image_id)
    except DockerException as exc:
        raise ImageUnavailable(f"engine {engine}: cannot send it the run's image {image_id}: "
                               f"{' '.join(str(exc).split())[:200]}") from None
    return "transferred (its own build differed)"


def _local_default() -> bool:
    """The current engine (DOCKER_HOST, else the current Docker context, as the docker CLI
    picks it) is on this machine's socket: today's default, bind mounts without a probe."""
    from pytest_agentbench.sandbox.docker.engine_spec import parse_engine
    from pytest_agentbench.sandbox.docker.engine_store import resolve

    try:
        return resolve(parse_engine("default")).url.startswith("unix://")
    except ValueError:
        return False  # plan_engines says why, in one line


def _source_client() -> Any:
    """The controller's own engine, where the run's image was found or built (the docker CLI's
    current engine, as `runner_image` used it)."""
    from pytest_agentbench.sandbox.docker.engines import connect, parse_engine

    return connect(parse_engine("default"), timeout=600)
