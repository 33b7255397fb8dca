"""The lines a command's wrapper writes after the command on its exec's stderr, each carrying the
exec's nonce (sandbox/docker/policy.py COLLECT and EPILOGUE), taken off the stream by
DockerSandbox once the trailer says the wrapper alone wrote them."""

from __future__ import annotations

import base64
import binascii

import pytest_agentbench.sandbox.docker.policy as policy
from pytest_agentbench.sandbox.capture import OutputBuffer
from pytest_agentbench.sandbox.port import COLLECT_MAX_BYTES, EPILOGUE_MAX_BYTES

# the COLLECT line at its largest: the base64 of COLLECT_MAX_BYTES + 1 bytes, nonce and marks
COLLECT_WINDOW = 4 * (COLLECT_MAX_BYTES + 3) // 3 + 256


def collected(err: OutputBuffer, nonce: str) -> tuple[bool, bytes | None]:
    """The wrapper's COLLECT line (docker.policy), taken off the stream: (read, content; None
    when no regular file was there). Not read: a larger file, one the wrapper could not read, a
    line missing or malformed; the caller then reads the file with a command of its own."""
    prefix = policy.FILE_MARK + nonce.encode() + b" "
    line = err.pop_trailer(prefix, window=COLLECT_WINDOW)
    if line is None:
        return False, None
    value = line[len(prefix):].rstrip(b"\n")
    if value == b".":
        return True, None
    if not value.startswith(b"+"):
        return False, None
    try:
        data = base64.b64decode(value[1:], validate=True)
    except (binascii.Error, ValueError):
        return False, None
    return (True, data) if len(data) <= COLLECT_MAX_BYTES else (False, None)


# the EPILOGUE line at its largest
EPILOGUE_WINDOW = 4 * (EPILOGUE_MAX_BYTES + 3) // 3 + 256


def epilogue_output(err: OutputBuffer, nonce: str) -> str | None:
    """The wrapper's EPILOGUE line (docker.policy), taken off the stream: the script's stdout when
    it exited 0 and fits EPILOGUE_MAX_BYTES, else None (the caller runs it by itself)."""
    prefix = policy.EPILOGUE_MARK + nonce.encode() + b" "
    line = err.pop_trailer(prefix, window=EPILOGUE_WINDOW)
    if line is None:
        return None
    value = line[len(prefix):].rstrip(b"\n")
    if not value.startswith(b"+"):
        return None
    try:
        data = base64.b64decode(value[1:], validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(data) > EPILOGUE_MAX_BYTES:
        return None
    return data.decode("utf-8", errors="replace")
