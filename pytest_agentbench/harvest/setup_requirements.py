"""Requirement strings (PEP 508) as far as setup inference needs them: a name, whether the runner
image already satisfies one, whether a test or dev dependency is tooling that running the tests
does not need, and poetry's version constraints spelled as PEP 440.

Deliberately small: no resolver, no full marker grammar. Anything not understood is kept, so that
pip (which understands it) decides at setup time; only what is surely unneeded is dropped."""

from __future__ import annotations

import re

NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
PYTHON_MARKER = re.compile(r"""^\s*python_version\s*(<=|>=|==|!=|<|>)\s*['"]([0-9.]+)['"]\s*$""")
CLAUSE = re.compile(r"^\s*(===|==|!=|<=|>=|~=|<|>)\s*([0-9][0-9.]*)\s*$")

RUNNER_PYTHON = (3, 11)  # the runner image's interpreter (pytest_agentbench/runner/Dockerfile)
# What Debian bookworm's python3-pytest and python3-pip put in the runner image (`pip list` there).
IMAGE_PACKAGES = {
    "pytest": "7.2.1",
    "pluggy": "1.0.0",
    "iniconfig": "1.1.1",
    "packaging": "23.0",
    "attrs": "22.2.0",
    "more-itertools": "8.10.0",
    "py": "1.11.0",
    "setuptools": "66.1.1",
    "wheel": "0.38.4",
    "pip": "23.0.1",
}
# Test and dev dependencies that running a project's tests does not need: coverage, linters,
# type checkers, docs, release and environment tools. Kept when the pytest configuration uses them.
TOOLING = frozenset(
    [
        "coverage",
        "codecov",
        "coveralls",
        "pytest-cov",
        "pytest-sugar",
        "pytest-instafail",
        "pytest-randomly",
        "pytest-xdist",
        "pytest-clarity",
        "pytest-pretty",
        "mypy",
        "pyright",
        "pre-commit",
        "black",
        "isort",
        "ruff",
        "pylint",
        "flake8",
        "pycodestyle",
        "pydocstyle",
        "pyflakes",
        "autopep8",
        "yapf",
        "pyupgrade",
        "codespell",
        "bump2version",
        "bumpversion",
        "bump-my-version",
        "twine",
        "tox",
        "nox",
        "build",
        "check-manifest",
        "pip-tools",
        "towncrier",
        "sphinx",
        "mkdocs",
        "ipython",
        "ipdb",
        "pdbpp",
    ]
)
TOOLING_PREFIXES = ("types-", "flake8-", "sphinx-", "sphinxcontrib-", "mkdocs-", "tox-")
# A plugin the pytest configuration relies on: the text that shows it in addopts or the ini keys.
CONFIG_USES = {
    "pytest-cov": re.compile(r"--cov"),
    "coverage": re.compile(r"--cov"),
    "pytest-xdist": re.compile(r"(^|\s)(-n|--numprocesses|--dist)\b"),
    "pytest-randomly": re.compile(r"--randomly|-p\s*randomly\b"),
}


def canonical(name: str) -> str:
    """A distribution name as pip compares it (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str | None:
    """The canonical name of a PEP 508 requirement, or None when the line is no requirement."""
    match = NAME.match(requirement)
    return canonical(match.group(1)) if match else None


def version_spec(requirement: str) -> str:
    """The version clauses of a requirement ("" when unpinned): after the name and extras, before
    the marker."""
    head = requirement.split(";", 1)[0]
    head = NAME.sub("", head, count=1)
    return re.sub(r"^\s*\[[^\]]*\]", "", head).strip().strip("()")


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())


def spec_allows(spec: str, version: str) -> bool:
    """Whether `version` surely satisfies every clause of `spec`; False when a clause is not
    understood (then the requirement is kept and pip decides)."""
    have = version_tuple(version)
    for clause in filter(None, (part.strip() for part in spec.split(","))):
        match = CLAUSE.match(clause)
        if match is None or not compares(have, match.group(1), version_tuple(match.group(2))):
            return False
    return True


def compares(have: tuple[int, ...], op: str, want: tuple[int, ...]) -> bool:
    width = max(len(have), len(want))
    left, right = have + (0,) * (width - len(have)), want + (0,) * (width - len(want))
    outcomes = {
        "<": left < right,
        "<=": left <= right,
        ">": left > right,
        ">=": left >= right,
        "==": left == right,
        "===": left == right,
        "!=": left != right,
    }
    return outcomes.get(op, False)


def marker_excludes_runner(requirement: str) -> bool:
    """True when the requirement's marker is a python_version comparison the runner's Python
    fails (`importlib-metadata; python_version < "3.8"`); any other marker is left to pip."""
    if ";" not in requirement:
        return False
    match = PYTHON_MARKER.match(requirement.split(";", 1)[1])
    if match is None:
        return False
    runner = ".".join(map(str, RUNNER_PYTHON))
    return not spec_allows(f"{match.group(1)}{match.group(2)}", runner)


def image_satisfies(requirement: str) -> bool:
    """Whether the runner image already has a version of this requirement's package it allows."""
    name = requirement_name(requirement)
    have = IMAGE_PACKAGES.get(name or "")
    return (
        have is not None
        and "[" not in requirement.split(";")[0]
        and spec_allows(version_spec(requirement), have)
    )


def is_tooling(name: str, pytest_config: str) -> bool:
    """Whether a test or dev dependency is tooling the tests do not need, given the pytest
    configuration's text (a plugin its addopts name is needed)."""
    if name in CONFIG_USES and CONFIG_USES[name].search(pytest_config):
        return False
    return name in TOOLING or name.startswith(TOOLING_PREFIXES)


def needed(
    requirements: list[str], pytest_config: str, project: str | None, tests: bool
) -> list[str]:
    """The requirements the tests need, in order, once each: without what the image has, what the
    runner's Python excludes, the project itself and, for test and dev lists, tooling."""
    kept: list[str] = []
    seen: set[str] = set()
    for requirement in requirements:
        name = requirement_name(requirement)
        if name is None or name in seen or name == project:
            continue
        seen.add(name)
        if image_satisfies(requirement) or marker_excludes_runner(requirement):
            continue
        if tests and is_tooling(name, pytest_config):
            continue
        kept.append(requirement.strip())
    return kept


def poetry_requirement(name: str, constraint: object) -> str | None:
    """A poetry dependency entry as a PEP 508 requirement; None for a path dependency."""
    if isinstance(constraint, list):
        constraint = constraint[0] if constraint else "*"
    if isinstance(constraint, dict):
        if "git" in constraint:
            ref = constraint.get("rev") or constraint.get("tag") or constraint.get("branch")
            return f"{name} @ git+{constraint['git']}" + (f"@{ref}" if ref else "")
        if "version" not in constraint:
            return None
        constraint = constraint["version"]
    return name + poetry_spec(str(constraint))


def poetry_spec(constraint: str) -> str:
    """Poetry's `*`, `^1.2`, `~1.2` and bare `1.2` as PEP 440 clauses; the rest as written."""
    constraint = constraint.strip()
    if constraint in ("", "*"):
        return ""
    if constraint[0] in "^~" and constraint[1:2] != "=":
        parts = list(version_tuple(constraint[1:])) or [0]
        return f">={constraint[1:]},<{upper_bound(parts, caret=constraint[0] == '^')}"
    return f"=={constraint}" if constraint[0].isdigit() else constraint


def upper_bound(parts: list[int], caret: bool) -> str:
    """The exclusive upper bound of `^` (the first non-zero part moves) or `~` (the minor moves,
    or the major when only it is given)."""
    if caret:
        index = next((i for i, part in enumerate(parts) if part), len(parts) - 1)
    else:
        index = 1 if len(parts) > 1 else 0
    bumped = parts[:index] + [parts[index] + 1]
    return ".".join(map(str, bumped))
