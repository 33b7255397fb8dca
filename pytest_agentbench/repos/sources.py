"""Repository URLs: telling remote URLs from paths, cache keys, and taskpack-local sources.

A task's ``repo.url`` is untrusted input that ends up on git's command line: it is checked here
again (the spec checks it at load time) so that no caller can hand git an option, a remote
helper or a path outside the taskpacks.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from pytest_agentbench.paths.own_repo import is_own_repository, own_repository_hint
from pytest_agentbench.repos.gitcmd import RepoError, redact
from pytest_agentbench.schemas.task import repo_url_problem

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
# git's own rule: "host:path" is scp-like ssh when a colon comes before any slash.
_SCP_LIKE = re.compile(r"^(?:[^@/]+@)?(?P<host>[^/:]+):(?!//)")
_BUNDLE_HEADERS = (b"# v2 git bundle", b"# v3 git bundle")


def is_url(url: str) -> bool:
    """True for anything git treats as a URL (``scheme://`` or scp-like ``host:path``)."""
    if url.startswith("-"):
        return False
    return bool(_SCHEME.match(url) or _SCP_LIKE.match(url))


def check_git_source(source: str) -> str:
    """``source`` unchanged if it is safe to give git: an allowed URL, or an absolute path as
    :func:`resolve_source` returns for a taskpack-local repository. Raises RepoError."""
    # An absolute path gets the same checks minus "no absolute paths".
    problem = repo_url_problem("." + source if source.startswith("/") else source)
    if problem is not None:
        raise RepoError(f"repository URL {redact(source)!r} refused: {problem}")
    return source


def normalize_url(url: str) -> str:
    """A canonical spelling used as the cache key: no credentials, lower-case host,
    no trailing ``/`` or ``.git`` on remote URLs, local paths as absolute ``file://``."""
    url = url.strip()
    if _SCHEME.match(url):
        parts = urlsplit(url)
        if parts.scheme.lower() == "file":
            return "file://" + os.path.normpath(parts.path)
        host = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
        path = _strip_repo_suffix(parts.path)
        return urlunsplit((parts.scheme.lower(), host, path, parts.query, ""))
    scp = _SCP_LIKE.match(url)
    if scp:
        rest = url[scp.end() :]
        return f"ssh://{scp.group('host').lower()}/{_strip_repo_suffix(rest).lstrip('/')}"
    return "file://" + str(Path(url).expanduser().resolve())


def mirror_key(url: str) -> str:
    """First 16 hex digits of sha256 over the normalized URL."""
    return hashlib.sha256(normalize_url(url).encode()).hexdigest()[:16]


def resolve_source(url: str, task_dir: Path, root: Path | None = None) -> str:
    """Turn a task spec's ``repo.url`` into something git can fetch from.

    URLs (``https://``, ``ssh://``, ``file://``, ``host:path``) pass through unchanged. Anything
    else is a path, relative to the directory holding task.yaml, that must name a git bundle
    file or a repository directory (bare or not) inside ``root``, the taskpacks directory
    (default: two levels above ``task_dir``, as in ``<taskpacks>/<suite>/<task>``), or the git
    repository that contains ``root`` (paths/own_repo.py); it comes back absolute, with symlinks
    resolved.
    """
    if not url:
        raise RepoError("repository URL is empty")
    problem = repo_url_problem(url)
    if problem is not None:
        raise RepoError(f"repository URL {redact(url)!r} refused: {problem}")
    if is_url(url):
        return url
    task_dir = Path(task_dir).resolve()
    root = (Path(root) if root is not None else task_dir.parent.parent).resolve()
    path = (task_dir / url).resolve()
    if not path.is_relative_to(root) and not is_own_repository(path, root):
        raise RepoError(
            f"repository {url!r} resolves outside the taskpacks directory {root}: {path}; "
            f"a relative path may name {own_repository_hint(root, task_dir)}"
        )
    if path.is_file():
        if not _is_bundle(path):
            raise RepoError(f"repository {url!r} is a file but not a git bundle: {path}")
        return str(path)
    if not path.is_dir():
        where = f" (relative to task dir {task_dir})"
        raise RepoError(f"repository {redact(url)!r} not found: {path} does not exist{where}")
    return str(path)


def _strip_repo_suffix(path: str) -> str:
    path = path.rstrip("/")
    return path[: -len(".git")] if path.endswith(".git") else path


def _is_bundle(path: Path) -> bool:
    with path.open("rb") as fh:
        head = fh.read(16)
    return head.startswith(_BUNDLE_HEADERS)
