"""Setup inference for harvested tasks: from a commit's files, the commands that
prepare the runner's sandbox for its tests, the environment its test commands need, and a key
that lets every commit with the same dependencies share one environment.

General rules, no per-repository code:

- Import root: `src/` when Python files live there (or setuptools' package-dir maps "" to a
  folder), else the repository root (`python -m pytest` puts it on sys.path). A non-root import
  root becomes PYTHONPATH in `test_env`.
- Dependencies: the project's declared runtime dependencies, plus the test dependencies of the
  first source that declares any (PEP 735 groups, the project's test/tests/testing/dev extra,
  poetry groups, tests_require, test requirement files, tox's test environment; see
  setup_declared.py). What the runner image already has (pytest and its dependencies), what the
  runner's Python 3.11 excludes by marker, and tooling (coverage, linters, type stubs, docs,
  release tools; setup_requirements.py) are dropped.
- No install when nothing is left and the project needs no build: a pure-Python project tested
  with pytest or unittest runs as checked out, offline.
- Otherwise one `pip install` of the remaining requirements, spelled out (no build of the
  project, so an old or network-needing build backend does not matter); the project itself is
  installed editable only when it must be built: compiled extensions, a version file written at
  install time, install_requires computed in setup.py. A requirements file with pip options is
  given to pip as is.
- A Makefile or noxfile is never executed; `given` (--setup) commands are used as they are.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pytest_agentbench.harvest.setup_declared import (
    DYNAMIC,
    Dependencies,
    project_name,
    pyproject,
    runtime_dependencies,
    setup_keywords,
    test_dependencies,
)
from pytest_agentbench.harvest.setup_files import ProjectFiles
from pytest_agentbench.harvest.setup_requirements import needed, requirement_name

PIP_INSTALL = "pip install --no-warn-script-location"
COMPILING_BUILD_REQUIRES = frozenset(
    ["cython", "pybind11", "maturin", "scikit-build", "scikit-build-core", "meson-python"]
    + ["setuptools-rust", "cffi", "numpy"]
)
MANIFESTS = (
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "tox.ini",
    "pytest.ini",
    "requirements.txt",
    "Pipfile",
    "Pipfile.lock",
    "poetry.lock",
    "uv.lock",
    "pdm.lock",
)


@dataclass(frozen=True)
class SetupPlan:
    commands: tuple[str, ...]  # setup commands to run in the sandbox workspace root, in order
    test_env: tuple[
        tuple[str, str], ...
    ]  # env prefix for test commands, e.g. (("PYTHONPATH", "src"),)
    network_policy: str  # "none" when commands is empty, else "setup_only"
    manifests: tuple[
        tuple[str, str], ...
    ]  # (path, sha256) of every file the plan was derived from, sorted
    source: str  # one line: what was inferred from what
    # The manifests whose content the commands read at setup time (a requirements file given to
    # pip, the whole project when it is installed); None: all of them. Requirements spelled out
    # in the commands read none, so a release's version bump does not split the environment.
    setup_inputs: tuple[str, ...] | None = None

    def key(self) -> str:
        """sha256 over commands, test_env and the manifests the setup reads: commits with the same
        key can share one environment."""
        inputs = [
            m for m in self.manifests if self.setup_inputs is None or m[0] in self.setup_inputs
        ]
        payload = json.dumps([self.commands, self.test_env, inputs])
        return hashlib.sha256(payload.encode()).hexdigest()


def infer_setup(
    read: Callable[[str], bytes | None], paths: Sequence[str], given: Sequence[str] = ()
) -> SetupPlan:
    """The setup plan for the commit whose files are `paths`, read through `read`; with `given`
    (the user's --setup commands) those are the commands, and only test_env and manifests are
    inferred."""
    files = ProjectFiles(read, paths)
    root = import_root(files)
    test_env = (("PYTHONPATH", root),) if root else ()
    layout = f"{root}/ layout (PYTHONPATH={root})" if root else "root layout"
    if given:
        for path in manifest_paths(files):
            files.text(path)
        return plan(
            files, tuple(given), test_env, f"given --setup commands ({len(given)}); {layout}", None
        )
    commands, inputs, how = install_commands(files)
    return plan(files, commands, test_env, f"{how}; {layout}", inputs)


def plan(
    files: ProjectFiles,
    commands: tuple[str, ...],
    test_env: tuple[tuple[str, str], ...],
    source: str,
    inputs: tuple[str, ...] | None,
) -> SetupPlan:
    source = "; ".join([source, *files.notes])
    return SetupPlan(
        commands, test_env, "setup_only" if commands else "none", files.manifests(), source, inputs
    )


def manifest_paths(files: ProjectFiles) -> list[str]:
    """The dependency manifests present: the usual names and every requirements*.txt."""
    listed = [path for path in MANIFESTS if files.has(path)]
    return listed + sorted(
        path
        for path in files.paths
        if path.endswith(".txt")
        and ("requirements" in path.rsplit("/", 1)[-1] or path.startswith("requirements/"))
        and path not in listed
    )


def import_root(files: ProjectFiles) -> str | None:
    """The folder the project's packages import from, when it is not the repository root."""
    mapped = package_dir(files)
    if mapped:
        return mapped
    return (
        "src"
        if any(path.startswith("src/") and path.endswith(".py") for path in files.paths)
        else None
    )


def package_dir(files: ProjectFiles) -> str | None:
    """setuptools' package-dir for the root package (pyproject, setup.cfg or setup.py)."""
    mapping = pyproject(files).get("tool", {}).get("setuptools", {}).get("package-dir")
    if not isinstance(mapping, dict) and files.has("setup.cfg"):
        lines = files.ini("setup.cfg").get("options", "package_dir", fallback="").splitlines()
        mapping = dict(line.split("=", 1) for line in lines if "=" in line)
        mapping = {key.strip(): value.strip() for key, value in mapping.items()}
    if not isinstance(mapping, dict) and files.has("setup.py"):
        mapping = setup_keywords(files).get("package_dir")
    folder = mapping.get("") if isinstance(mapping, dict) else None
    return folder.strip("/") if isinstance(folder, str) and folder.strip("/.") else None


def build_reason(files: ProjectFiles, runtime: Dependencies | None) -> str | None:
    """Why the project itself must be built and installed before its tests run; None if not."""
    requires = pyproject(files).get("build-system", {}).get("requires", [])
    compiling = [
        name for name in map(requirement_name, requires) if name in COMPILING_BUILD_REQUIRES
    ]
    setup_py = files.text("setup.py") or ""
    reasons = [
        (bool(compiling), f"build-system requires {compiling[0] if compiling else ''}"),
        (files.has("Cargo.toml"), "Cargo.toml (Rust extension)"),
        (any(path.endswith(".pyx") for path in files.paths), "Cython sources"),
        ("Extension(" in setup_py or "cythonize(" in setup_py, "setup.py builds extension modules"),
        (bool(runtime and runtime.dynamic), "setup.py computes install_requires"),
    ]
    version_file = generated_version_file(files)
    if version_file and not files.has(version_file):
        reasons.append((True, f"{version_file} is written at install"))
    return next((reason for applies, reason in reasons if applies), None)


def generated_version_file(files: ProjectFiles) -> str | None:
    """The version file setuptools_scm or hatch-vcs writes at install, if configured."""
    tool = pyproject(files).get("tool", {})
    scm = tool.get("setuptools_scm", {})
    hatch = tool.get("hatch", {}).get("build", {}).get("hooks", {}).get("vcs", {})
    setup_scm = setup_keywords(files).get("use_scm_version") if files.has("setup.py") else None
    candidates = [scm.get("version_file"), scm.get("write_to"), hatch.get("version-file")]
    if isinstance(setup_scm, dict) and setup_scm is not DYNAMIC:
        candidates.append(setup_scm.get("write_to"))
    return next((path for path in candidates if isinstance(path, str)), None)


def pytest_config(files: ProjectFiles) -> str:
    """The pytest configuration's text, wherever it is: which plugins its options rely on."""
    parts = [json.dumps(pyproject(files).get("tool", {}).get("pytest", {}))]
    for path, section in (
        ("pytest.ini", "pytest"),
        ("tox.ini", "pytest"),
        ("setup.cfg", "tool:pytest"),
    ):
        ini = files.ini(path) if files.has(path) else None
        if ini is not None and ini.has_section(section):
            parts += [value for _, value in ini.items(section)]
    return "\n".join(parts)


def install_commands(files: ProjectFiles) -> tuple[tuple[str, ...], tuple[str, ...] | None, str]:
    """The setup commands, the manifests they read, and how they were inferred (one line)."""
    runtime, tests = runtime_dependencies(files), test_dependencies(files)
    config, name, build = pytest_config(files), project_name(files), build_reason(files, runtime)
    runtime_left = needed(list(runtime.requirements) if runtime else [], config, name, tests=False)
    tests_left = needed(list(tests.requirements) if tests else [], config, name, tests=True)
    found = "; ".join(
        f"{deps.where}: {len(deps.requirements)}" for deps in (runtime, tests) if deps
    )
    commands: list[str] = []
    if build:
        extra = tests.extra if tests and tests.extra and tests_left else None
        commands.append(f"{PIP_INSTALL} -e " + (shlex.quote(f".[{extra}]") if extra else "."))
        runtime_left, tests_left = [], [] if extra else tests_left
    as_is = [deps.as_is_file for deps in (runtime, tests) if deps and deps.as_is_file]
    commands += [f"{PIP_INSTALL} -r {shlex.quote(path)}" for path in as_is]
    if tests and tests.as_is_file:
        tests_left = []
    if runtime and runtime.as_is_file:
        runtime_left = []
    spelled = runtime_left + [dep for dep in tests_left if dep not in runtime_left]
    if spelled:
        commands.append(f"{PIP_INSTALL} " + " ".join(map(shlex.quote, spelled)))
    inputs = None if build or as_is else ()
    return tuple(commands), inputs, describe(found, build, spelled, commands)


def describe(found: str, build: str | None, spelled: list[str], commands: list[str]) -> str:
    declared = found or "no dependencies declared"
    if not commands:
        return f"no install: {declared}; nothing the runner image lacks"
    parts = [declared]
    if build:
        parts.append(f"editable install ({build})")
    if spelled:
        parts.append("pip install " + " ".join(spelled))
    return "; ".join(parts)
