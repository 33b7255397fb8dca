"""The runner image: build it, offline if need be, and check the one a run uses (`runner_image`:
the engine answers, the image named exists or the default one is built).

The build context is the package's `runner/` directory (`pytest_agentbench/runner/`, shipped in the
wheel as package data), or a directory given explicitly. Its content hash names the image, so a
build with an unchanged context is a no-op, and a wheel install and a checkout of the same commit
name the same image. With no registry
reachable, the base is bootstrapped locally: `debootstrap --variant=minbase bookworm` then
`docker import`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from pytest_agentbench import __version__

IMAGE_REPO = "agentbench/py-runner"
DEFAULT_IMAGE = f"{IMAGE_REPO}:{__version__}"
REGISTRY_BASE = "debian:bookworm-slim"
LOCAL_BASE = "agentbench/debian-base:bookworm"
HASH_LABEL = "agentbench.context_hash"
DEBIAN_MIRROR = os.environ.get("AGENTBENCH_DEBIAN_MIRROR", "http://deb.debian.org/debian")


# What to do when Docker is missing, in terms a pip user has (scripts/ensure-docker is only in a
# checkout of pytest-agentbench).
DAEMON_UNREACHABLE = (
    "Docker daemon not reachable: start Docker (or set DOCKER_HOST) and check with "
    "`agentbench doctor`; in a checkout of pytest-agentbench, scripts/ensure-docker installs and "
    "starts it"
)
DOCKER_CLI_MISSING = (
    "docker CLI not found: install Docker so that `docker` is on PATH, then check with "
    "`agentbench doctor`; in a checkout of pytest-agentbench, scripts/ensure-docker installs it"
)


class ImageBuildError(RuntimeError):
    pass


class DaemonUnreachable(ImageBuildError):
    """The docker CLI is missing or its daemon does not answer: nothing can be built or run, so
    nothing is tried (no registry pull, no debootstrap). The message is one line."""


def check_daemon(timeout: float = 30.0) -> None:
    """DaemonUnreachable unless `docker info` answers within `timeout` seconds."""
    try:
        subprocess.run(["docker", "info"], capture_output=True, timeout=timeout, check=True)
    except FileNotFoundError:
        raise DaemonUnreachable(DOCKER_CLI_MISSING) from None
    except (OSError, subprocess.SubprocessError):
        raise DaemonUnreachable(DAEMON_UNREACHABLE) from None


@dataclass
class BuiltImage:
    name: str
    image_id: str
    digest: str | None
    context_hash: str
    built: bool
    seconds: float
    base: str


# What never belongs to a build context: byte-code caches and editor/OS litter that an install or
# a checkout may leave beside the files (they would change the hash, not the image).
_NOT_CONTEXT = ("__pycache__", ".DS_Store")
_NOT_CONTEXT_SUFFIXES = (".pyc", ".pyo", ".swp", "~")


def default_context() -> Path:
    """The runner image's build context inside the installed package."""
    return Path(__file__).resolve().parents[2] / "runner"


def context_files(context: Path) -> list[Path]:
    """The files of the build context that name the image, sorted."""
    return sorted(
        p
        for p in context.rglob("*")
        if p.is_file()
        and not any(part in _NOT_CONTEXT for part in p.relative_to(context).parts)
        and not p.name.endswith(_NOT_CONTEXT_SUFFIXES)
    )


def context_hash(context: Path) -> str:
    digest = hashlib.sha256()
    for path in context_files(context):
        digest.update(path.relative_to(context).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _docker(*args: str, check: bool = True, **kw: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["docker", *args], capture_output=True, text=True, **kw)  # type: ignore[call-overload]
    if check and proc.returncode != 0:
        raise ImageBuildError(f"docker {' '.join(args[:2])} failed: {proc.stderr.strip()[-800:]}")
    return proc  # type: ignore[no-any-return]


def inspect_image(name: str) -> dict[str, str | None] | None:
    proc = _docker("image", "inspect", name, check=False)
    if proc.returncode != 0:
        return None
    data = json.loads(proc.stdout)[0]
    labels = (data.get("Config") or {}).get("Labels") or {}
    digests = data.get("RepoDigests") or []
    return {
        "id": data["Id"],
        "context_hash": labels.get(HASH_LABEL),
        "digest": digests[0] if digests else None,
    }


def registry_answers(timeout: float = 20.0) -> bool:
    """True when the registry base can be pulled (or is already present)."""
    if inspect_image(REGISTRY_BASE):
        return True
    try:
        proc = _docker("pull", REGISTRY_BASE, check=False, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False
    return proc.returncode == 0


def bootstrap_local_base(log: Log) -> str:
    """debootstrap a minimal bookworm and import it as LOCAL_BASE (skipped when present)."""
    if inspect_image(LOCAL_BASE):
        return LOCAL_BASE
    if shutil.which("debootstrap") is None:
        if os.geteuid() == 0 and shutil.which("apt-get"):
            log("installing debootstrap")
            subprocess.run(
                ["apt-get", "install", "-y", "-qq", "debootstrap"], check=True, capture_output=True
            )
        else:
            raise ImageBuildError(
                "no registry answers and debootstrap is not installed "
                "(apt-get install debootstrap, as root)"
            )
    if os.geteuid() != 0:
        raise ImageBuildError("no registry answers; bootstrapping a local base needs root")
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="agentbench-rootfs-") as root:
        log(f"no registry: debootstrap bookworm from {DEBIAN_MIRROR}")
        proc = subprocess.run(
            ["debootstrap", "--variant=minbase", "bookworm", root, DEBIAN_MIRROR],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise ImageBuildError(f"debootstrap failed: {proc.stdout[-800:]}{proc.stderr[-800:]}")
        returncode, stderr = _import_tree(Path(root), LOCAL_BASE)
        if returncode != 0:
            raise ImageBuildError(f"docker import failed: {stderr.strip()[-800:]}")
    log(f"local base {LOCAL_BASE} ready in {time.monotonic() - start:.1f}s")
    return LOCAL_BASE


def _import_tree(root: Path, name: str) -> tuple[int, str]:
    """`tar -c root | docker import - name`: the import's status and stderr. Only the import
    holds the pipe's read end (this process closes its copy), so an import that stops early
    leaves tar a broken pipe instead of a full one it would wait on for ever;
    tar is killed either way before this returns."""
    tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
    assert tar.stdout is not None
    try:
        imp = subprocess.Popen(["docker", "import", "-", name], stdin=tar.stdout,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        tar.stdout.close()
        _, stderr = imp.communicate()
    finally:
        tar.stdout.close()
        try:
            tar.wait(timeout=30)  # it ends at the end of the tree, or at the broken pipe
        except subprocess.TimeoutExpired:
            tar.kill()
            tar.wait()
    return imp.returncode, stderr


class Log:
    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet

    def __call__(self, msg: str) -> None:
        if not self.quiet:
            print(f"agentbench image: {msg}", file=sys.stderr, flush=True)


def choose_base(mode: str, log: Log) -> str:
    mode = os.environ.get("AGENTBENCH_BASE", mode)
    if mode == "registry":
        return REGISTRY_BASE
    if mode == "local":
        return bootstrap_local_base(log)
    if registry_answers():
        return REGISTRY_BASE
    return bootstrap_local_base(log)


def ensure_image(
    context: Path | None = None,
    name: str = DEFAULT_IMAGE,
    base: str = "auto",
    force: bool = False,
    quiet: bool = False,
) -> BuiltImage:
    """Return the runner image for the current context, building it only when needed.
    DaemonUnreachable first of all when there is no engine to build on or run with."""
    log = Log(quiet)
    context = context or default_context()
    if not (context / "Dockerfile").is_file():
        raise ImageBuildError(f"{context}/Dockerfile not found")
    check_daemon()
    chash = context_hash(context)
    hash_tag = f"{IMAGE_REPO}:ctx-{chash}"
    start = time.monotonic()
    found = None if force else inspect_image(hash_tag)
    if found:
        _docker("tag", hash_tag, name)
        return BuiltImage(
            name,
            str(found["id"]),
            found["digest"],
            chash,
            False,
            time.monotonic() - start,
            "(cached)",
        )
    base_image = choose_base(base, log)
    log(f"building {name} from base {base_image} (context hash {chash})")
    proc = subprocess.run(
        [
            "docker",
            "build",
            "--build-arg",
            f"BASE={base_image}",
            "--label",
            f"{HASH_LABEL}={chash}",
            "-t",
            hash_tag,
            "-t",
            name,
            str(context),
        ],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise ImageBuildError(f"docker build failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    info = inspect_image(hash_tag)
    assert info is not None
    return BuiltImage(
        name, str(info["id"]), info["digest"], chash, True, time.monotonic() - start, base_image
    )


# -- the runner image of a run ----------------------------------------------------------------
class ImageUnavailable(Exception):
    """No runner image for the run: the engine does not answer, the image named is missing, or
    the build failed. The message is one line for the user. `usage` is True when the user
    named what is not there (--agentbench-image): a bad option, not the infrastructure."""

    def __init__(self, message: str, *, usage: bool = False) -> None:
        super().__init__(message)
        self.usage = usage


@dataclass(frozen=True)
class RunnerImage:
    """The image a run's sandboxes start from, as the records name it."""

    name: str
    id: str | None = None
    digest: str | None = None

    @property
    def ref(self) -> str:
        """The id, or the name when there is none (the local sandbox)."""
        return self.id or self.name

    def to_wire(self) -> dict[str, str | None]:
        return {"name": self.name, "id": self.id, "digest": self.digest}

    @classmethod
    def from_wire(cls, data: dict[str, str | None]) -> RunnerImage:
        return cls(str(data["name"]), data.get("id"), data.get("digest"))


LOCAL_IMAGE = RunnerImage("local")


def runner_image(sandbox: str, name: str | None) -> RunnerImage:
    """The run's image: for docker, the engine must answer and the image `name` must exist, or,
    with no name, the image of the package's runner/ is built when missing. ImageUnavailable
    otherwise."""
    if sandbox != "docker":
        return LOCAL_IMAGE
    try:
        check_daemon()
    except DaemonUnreachable as exc:
        hint = "" if str(exc) == DOCKER_CLI_MISSING else \
            ", or use --agentbench-sandbox local for unisolated test runs"
        raise ImageUnavailable(f"{exc}{hint}") from None
    try:
        if name:
            found = inspect_image(name)
            if not found:
                raise ImageUnavailable(f"--agentbench-image {name}: no such image", usage=True)
            return RunnerImage(name, found["id"], found["digest"])
        info = ensure_image(name=DEFAULT_IMAGE)
    except ImageBuildError as exc:
        raise ImageUnavailable(f"runner image: {exc}") from None
    except FileNotFoundError:
        raise ImageUnavailable(DOCKER_CLI_MISSING) from None
    return RunnerImage(info.name, info.image_id, info.digest)
