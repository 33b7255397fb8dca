"""What a failing pytest run's output points at: traceback frames (file, line), `E` lines, test
ids, test files and the modules an ImportError/ModuleNotFoundError names.

Understands pytest's long/short/line tracebacks (`path.py:12: in func`, `path.py:12: Error`),
plain Python tracebacks (`File "path.py", line 12, in func`), the summary lines
(`FAILED path::test - ...`, `ERROR path`) and collection errors. Paths are kept as printed:
pytest prints files under its rootdir relative to it, so an absolute path is outside the
workspace (site-packages, the standard library).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_PYTEST_FRAME = re.compile(r"^(?P<path>[^\s:][^:\n]*?\.py):(?P<line>\d+):(?:\s|$)")
_PY_FRAME = re.compile(r'^\s*File "(?P<path>[^"\n]+?\.py)", line (?P<line>\d+)')
_TEST_ID = re.compile(r"(?<![\w/.-])(?P<id>(?P<path>[\w./-]+\.py)::[\w.:\[\]-]*[\w\]])")
_SUMMARY = re.compile(r"^(?:FAILED|ERROR|XPASS|XFAIL)\s+(?P<path>[\w./-]+\.py)(?:::|\s|$)")
_COLLECT = re.compile(r"^_+ ERROR collecting (?P<path>[\w./-]+\.py) _+$")
_E_LINE = re.compile(r"^E\s{1,}(?P<text>.*)$")
_NO_MODULE = re.compile(r"No module named '(?P<name>[\w.]+)'")
_CANNOT_IMPORT = re.compile(r"cannot import name '(?P<name>\w+)' from '(?P<module>[\w.]+)'")


@dataclass(frozen=True)
class Frame:
    """One traceback frame: `path` as printed (relative to the rootdir when inside it)."""

    path: str
    line: int


@dataclass(frozen=True)
class FailingTest:
    """`path::name` (name may be `Class::method[param]`); `function` is the def to look for."""

    path: str
    name: str

    @property
    def function(self) -> str:
        return re.sub(r"\[.*$", "", self.name).split("::")[-1]

    def __str__(self) -> str:
        return f"{self.path}::{self.name}"


@dataclass
class FailureRefs:
    """Everything the output points at, each list in order of first appearance, no repeats."""

    frames: list[Frame] = field(default_factory=list)
    test_ids: list[FailingTest] = field(default_factory=list)
    test_files: list[str] = field(default_factory=list)
    error_lines: list[str] = field(default_factory=list)
    missing_modules: list[str] = field(default_factory=list)
    """Modules an ImportError/ModuleNotFoundError names (`x.y` of `No module named 'x.y'`, the
    module of `cannot import name 'n' from 'x.y'`)."""


def parse_failing_output(text: str) -> FailureRefs:
    """The references in a failing pytest run's output (any style; unknown lines are skipped)."""
    refs = FailureRefs()
    for raw in text.splitlines():
        line = raw.rstrip()
        frame = _PYTEST_FRAME.match(line) or _PY_FRAME.match(line)
        if frame:
            _add(refs.frames, Frame(_clean(frame["path"]), int(frame["line"])))
        error = _E_LINE.match(line)
        if error and error["text"].strip():
            _add(refs.error_lines, error["text"].strip())
        for match in _TEST_ID.finditer(line):
            path, _, name = match["id"].partition("::")
            _add(refs.test_ids, FailingTest(_clean(path), name))
            _add(refs.test_files, _clean(path))
        file_ref = _SUMMARY.match(line) or _COLLECT.match(line)
        if file_ref:
            _add(refs.test_files, _clean(file_ref["path"]))
        for found in _NO_MODULE.finditer(line):
            _add(refs.missing_modules, found["name"])
        for found in _CANNOT_IMPORT.finditer(line):
            _add(refs.missing_modules, found["module"])
    for ref in refs.frames:  # a frame in a test file makes it a test file too
        if is_test_file(ref.path):
            _add(refs.test_files, ref.path)
    return refs


def is_test_file(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"


def _clean(path: str) -> str:
    return path[2:] if path.startswith("./") else path


def _add(items: list, item: object) -> None:  # type: ignore[type-arg]
    if item not in items:
        items.append(item)
