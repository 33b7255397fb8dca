"""The runner image on another engine (the run's second and further Docker engines,
run/engine_setup.py; `agentbench doctor` checks them): present and verified by content, or
streamed there from the controller's engine (docker save -> docker load).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pytest_agentbench.sandbox.docker.image import (
    DEFAULT_IMAGE,
    HASH_LABEL,
    IMAGE_REPO,
    ImageUnavailable,
    context_hash,
    default_context,
)

TRANSFER_TIMEOUT = 600  # seconds an engine may take to answer while an image is copied to it


def ensure_image_on(client: Any, name: str = DEFAULT_IMAGE, source: Any | None = None,
                    context: Path | None = None) -> dict[str, Any]:
    """Make sure the engine behind `client` has the runner image `name`, verified by content:
    the package's context hash (HASH_LABEL) for DEFAULT_IMAGE, else the source engine's image id.
    When it does not, the image is streamed from the `source` engine (docker save -> docker
    load, chunk by chunk, never whole in memory or on disk) and checked again. Returns name, id,
    context_hash, how ("present" | "transferred"), seconds and bytes; ImageUnavailable (one
    line) when neither engine has it or the transfer fails."""
    from docker.errors import DockerException

    start = time.monotonic()
    chash = context_hash(context or default_context()) if name == DEFAULT_IMAGE else None
    try:
        wanted = _engine_image(source, name, chash, None) if source is not None else None
        found = _engine_image(client, name, chash, wanted)
        if found is not None:
            return _image_result(name, found, chash, "present", start, 0)
        if wanted is None:
            raise ImageUnavailable(
                f"runner image {name}{f' (context hash {chash})' if chash else ''} is on neither "
                "engine: build it on the controller's engine (`agentbench image build`)")
        sent = _stream_image(source, client, wanted["ref"])
        if chash is not None:
            client.api.tag(wanted["id"], IMAGE_REPO, f"ctx-{chash}")
        repo, _, tag = name.rpartition(":")
        client.api.tag(wanted["id"], repo or name, tag if repo else None)
        found = _engine_image(client, name, chash, wanted)
    except DockerException as exc:
        raise ImageUnavailable(f"runner image {name}: transfer failed: {exc}") from None
    if found is None:
        raise ImageUnavailable(f"runner image {name}: still missing or different after transfer")
    return _image_result(name, found, chash, "transferred", start, sent)


def _engine_image(client: Any, name: str, chash: str | None,
                  wanted: dict[str, str] | None) -> dict[str, str] | None:
    """The engine's image (id, ref, label hash) when it is the one wanted: by context hash when
    there is one, by the wanted id otherwise (the source's own image when `wanted` is None)."""
    from docker.errors import ImageNotFound

    refs = ([f"{IMAGE_REPO}:ctx-{chash}"] if chash else []) + [name]
    for ref in refs:
        try:
            data = client.api.inspect_image(ref)
        except ImageNotFound:
            continue
        label = ((data.get("Config") or {}).get("Labels") or {}).get(HASH_LABEL)
        ok = label == chash if chash else (wanted is None or data["Id"] == wanted["id"])
        if ok:
            return {"id": str(data["Id"]), "ref": ref, "context_hash": label or ""}
    return None


def _stream_image(source: Any, client: Any, ref: str) -> int:
    """docker save on `source` piped into docker load on `client`; the bytes sent. Both clients
    wait up to TRANSFER_TIMEOUT for each read meanwhile: the engine unpacks the whole image
    before it answers the load (a client made for pings would give up)."""
    saved = client.api.timeout, source.api.timeout
    client.api.timeout = source.api.timeout = max(TRANSFER_TIMEOUT, *(t for t in saved if t))
    try:
        return _pipe_image(source, client, ref)
    finally:
        client.api.timeout, source.api.timeout = saved


def _pipe_image(source: Any, client: Any, ref: str) -> int:
    sent = 0

    def chunks() -> Any:
        nonlocal sent
        for chunk in source.api.get_image(ref, chunk_size=1 << 20):
            sent += len(chunk)
            yield chunk

    for message in client.api.load_image(chunks(), quiet=True):
        if isinstance(message, dict) and message.get("error"):
            raise ImageUnavailable(f"runner image {ref}: docker load failed: {message['error']}")
    return sent


def _image_result(name: str, found: dict[str, str], chash: str | None, how: str, start: float,
                  sent: int) -> dict[str, Any]:
    return {"name": name, "id": found["id"], "context_hash": found["context_hash"] or chash,
            "how": how, "seconds": round(time.monotonic() - start, 3), "bytes": sent}
