"""A commit's files as setup inference reads them: through the harvest's `read` callback, each file
once, every file read (and present) remembered with its content's sha256, so that the plan can
name exactly what it was derived from. A manifest that does not parse is treated as absent and
noted; history holds broken files and inference never raises on them."""

from __future__ import annotations

import ast
import configparser
import hashlib
import posixpath
import re
import tomllib
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

T = TypeVar("T")
Read = Callable[[str], bytes | None]
INCLUDE = re.compile(r"^(?:-r|--requirement)[\s=]*(\S+)$")


class ProjectFiles:
    """The files at one commit, read on demand."""

    def __init__(self, read: Read, paths: Sequence[str]) -> None:
        self._read = read
        self.paths = frozenset(paths)
        self._contents: dict[str, bytes] = {}
        self._parses: dict[tuple[str, str], Any] = {}
        self.notes: list[str] = []

    def has(self, path: str) -> bool:
        return path in self.paths

    def text(self, path: str) -> str | None:
        """The file's text (undecodable bytes replaced), None when absent."""
        if path not in self.paths:
            return None
        if path not in self._contents:
            content = self._read(path)
            if content is None:
                return None
            self._contents[path] = content
        return self._contents[path].decode("utf-8", "replace")

    def toml(self, path: str) -> dict[str, Any]:
        """The file as TOML; {} when absent or not TOML (noted)."""
        return self._parsed("toml", path, self.text(path), self._parse_toml)

    def ini(self, path: str, text: str | None = None) -> configparser.RawConfigParser:
        """The file (or `text`, kept in it) as an ini file; empty when absent or not ini (noted)."""
        kind = "ini" if text is None else "ini-embedded"
        content = self.text(path) if text is None else text
        return self._parsed(kind, path, content, self._parse_ini)

    def python(self, path: str) -> ast.Module | None:
        """The file parsed as Python 3; None when absent or not Python 3 syntax (noted)."""
        return self._parsed("python", path, self.text(path), self._parse_python)

    def _parsed(
        self, kind: str, path: str, text: str | None, parse: Callable[[str, str | None], T]
    ) -> T:
        """Each file parsed once (and a parse error noted once)."""
        if (kind, path) not in self._parses:
            self._parses[kind, path] = parse(path, text)
        return cast(T, self._parses[kind, path])

    def _parse_toml(self, path: str, text: str | None) -> dict[str, Any]:
        if text is None:
            return {}
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            self.notes.append(f"{path} ignored (invalid TOML: {error})")
            return {}

    def _parse_ini(self, path: str, text: str | None) -> configparser.RawConfigParser:
        parser = configparser.RawConfigParser(strict=False, interpolation=None)
        if text is not None:
            try:
                parser.read_string(text, source=path)
            except configparser.Error as error:
                self.notes.append(f"{path} ignored (invalid ini: {str(error).splitlines()[0]})")
                return configparser.RawConfigParser(strict=False, interpolation=None)
        return parser

    def _parse_python(self, path: str, text: str | None) -> ast.Module | None:
        if text is None:
            return None
        try:
            return ast.parse(text, filename=path)
        except (SyntaxError, ValueError):
            self.notes.append(f"{path} ignored (not Python 3 syntax)")
            return None

    def manifests(self) -> tuple[tuple[str, str], ...]:
        """(path, sha256 of content) of every file read that was present, sorted by path."""
        return tuple(
            sorted(
                (path, hashlib.sha256(content).hexdigest())
                for path, content in self._contents.items()
            )
        )


def requirement_lines(
    files: ProjectFiles, path: str, seen: frozenset[str] = frozenset()
) -> tuple[list[str], bool]:
    """The requirements a requirements file lists, following `-r` includes; and whether it holds
    lines only pip understands (options, editable or URL installs): then pip must read it as is."""
    text = files.text(path)
    if text is None or path in seen:
        return [], False
    requirements: list[str] = []
    as_is = False
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        include = INCLUDE.match(line)
        if include:
            included = include.group(1)
            nested, nested_as_is = requirement_lines(
                files,
                posixpath.normpath(posixpath.join(posixpath.dirname(path), included)),
                seen | {path},
            )
            requirements += nested
            as_is = as_is or nested_as_is
        elif line.startswith("-") or "://" in line:
            as_is = True
        else:
            requirements.append(line)
    return requirements, as_is
