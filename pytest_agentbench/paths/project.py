"""The project root and its agentbench ini keys, found the way pytest finds its rootdir.

For the console commands (`agentbench report ...`, `gate`, `validate-tasks`), which run outside
pytest but must resolve `agentbench_out` and `agentbench_taskpacks` as a pytest run from the
same directory would. Pure: standard library only (tomllib, configparser), no pytest import.

The walk mirrors pytest's `locate_config` for a run without path arguments: from `start` (the
cwd) upwards, the first directory holding one of `CONFIG_NAMES` with pytest configuration in it
(`pytest.toml`/`.pytest.toml` always; `pytest.ini`/`.pytest.ini` always; `pyproject.toml` with
`[tool.pytest.ini_options]` or `[tool.pytest]`; `tox.ini` with `[pytest]`; `setup.cfg` with
`[tool:pytest]`) is the root; else the first directory with a `pyproject.toml` at all; else the
first with a `setup.py`; else `start` itself. A file that cannot be parsed is skipped (pytest
itself would refuse to start).
"""

from __future__ import annotations

import configparser
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KEYS = ("agentbench_out", "agentbench_taskpacks")
DEFAULT_OUT = "reports/runs"
DEFAULT_TASKPACKS = "taskpacks"


@dataclass(frozen=True)
class Project:
    """Where the project is: its root, the config file found (if any), the agentbench keys."""

    root: Path
    inifile: Path | None = None
    ini: dict[str, str] = field(default_factory=dict)

    def path(self, key: str, default: str) -> Path:
        """The ini value of `key` (relative to the root), else `default` under the root."""
        value = self.ini.get(key) or default
        return (self.root / Path(value).expanduser()).resolve()

    @property
    def out(self) -> Path:
        """The output root: ini `agentbench_out`, else `<root>/reports/runs`."""
        return self.path("agentbench_out", DEFAULT_OUT)

    @property
    def taskpacks(self) -> Path:
        """The taskpacks directory: ini `agentbench_taskpacks`, else `<root>/taskpacks`."""
        return self.path("agentbench_taskpacks", DEFAULT_TASKPACKS)


def _ini_section(path: Path, section: str) -> dict[str, str] | None:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, OSError, UnicodeDecodeError):
        return None
    if not parser.has_section(section):
        return None
    return dict(parser.items(section))


def _pytest_ini(path: Path) -> dict[str, str] | None:
    return _ini_section(path, "pytest") or {}  # always the config file, even without [pytest]


def _tox_ini(path: Path) -> dict[str, str] | None:
    return _ini_section(path, "pytest")


def _setup_cfg(path: Path) -> dict[str, str] | None:
    return _ini_section(path, "tool:pytest")


def _toml(path: Path) -> dict[str, Any] | None:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError):
        return None


def _strings(table: Any) -> dict[str, str]:
    if not isinstance(table, dict):
        return {}
    return {str(k): str(v) for k, v in table.items() if not isinstance(v, dict | list)}


def _pytest_toml(path: Path) -> dict[str, str] | None:
    document = _toml(path)
    return None if document is None else _strings(document.get("pytest", {}))


def _pyproject(path: Path) -> dict[str, str] | None:
    document = _toml(path)
    tool = document.get("tool", {}) if isinstance(document, dict) else {}
    table = tool.get("pytest") if isinstance(tool, dict) else None
    if not isinstance(table, dict):
        return None
    if "ini_options" in table:
        return _strings(table["ini_options"])
    return _strings(table)


# In pytest's precedence order (findpaths.CONFIG_LOADERS_BY_NAME).
CONFIG_NAMES: dict[str, Callable[[Path], dict[str, str] | None]] = {
    "pytest.toml": _pytest_toml,
    ".pytest.toml": _pytest_toml,
    "pytest.ini": _pytest_ini,
    ".pytest.ini": _pytest_ini,
    "pyproject.toml": _pyproject,
    "tox.ini": _tox_ini,
    "setup.cfg": _setup_cfg,
}


def find_project(start: Path | None = None) -> Project:
    """The project containing `start` (default: the cwd), as described in the module doc."""
    here = (start or Path.cwd()).resolve()
    first_pyproject: Path | None = None
    for base in (here, *here.parents):
        for name, loader in CONFIG_NAMES.items():
            candidate = base / name
            if not candidate.is_file():
                continue
            if name == "pyproject.toml" and first_pyproject is None:
                first_pyproject = candidate
            values = loader(candidate)
            if values is not None:
                keys = {k: v.strip() for k, v in values.items() if k in KEYS and v.strip()}
                return Project(base, candidate, keys)
    if first_pyproject is not None:
        return Project(first_pyproject.parent, first_pyproject)
    for base in (here, *here.parents):
        if (base / "setup.py").is_file():
            return Project(base)
    return Project(here)
