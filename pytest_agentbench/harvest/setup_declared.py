"""What a commit's manifests declare: runtime dependencies, test dependencies (the first source in
a fixed order of preference), the project's name and extras, and its setup.py keywords.

Read statically (TOML, ini, requirement files, setup.py's literals), never by running anything.
A setup.py whose install_requires is computed is reported as dynamic: pip must then install the
project to learn them."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from pytest_agentbench.harvest.setup_files import ProjectFiles, requirement_lines
from pytest_agentbench.harvest.setup_requirements import canonical, poetry_requirement

TEST_NAMES = ("test", "tests", "testing", "dev")  # extras and groups that hold test dependencies
REQUIREMENT_FILES = (
    "requirements-test.txt",
    "requirements_test.txt",
    "requirements-tests.txt",
    "requirements_tests.txt",
    "test-requirements.txt",
    "test_requirements.txt",
    "tests-requirements.txt",
    "requirements/test.txt",
    "requirements/tests.txt",
    "requirements/testing.txt",
    "tests/requirements.txt",
    "test/requirements.txt",
    "requirements-dev.txt",
    "requirements_dev.txt",
    "dev-requirements.txt",
    "requirements/dev.txt",
)
DYNAMIC = object()  # a setup() keyword whose value is computed


@dataclass(frozen=True)
class Dependencies:
    where: str  # the manifest and section they come from, for the plan's source line
    requirements: tuple[str, ...]
    extra: str | None = None  # the project's own extra they are, if one
    as_is_file: str | None = None  # a requirements file pip must read itself
    dynamic: bool = False  # declared in code: only installing the project resolves them


def pyproject(files: ProjectFiles) -> dict[str, Any]:
    return files.toml("pyproject.toml")


def setup_keywords(files: ProjectFiles) -> dict[str, object]:
    """The keywords of setup.py's setup() call as literals, DYNAMIC where computed."""
    module = files.python("setup.py")
    if module is None:
        return {}
    assigned = {
        target.id: node.value
        for node in module.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    for node in ast.walk(module):
        if isinstance(node, ast.Call) and call_name(node.func) == "setup":
            return {kw.arg: literal(kw.value, assigned) for kw in node.keywords if kw.arg}
    return {}


def call_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None


def literal(value: ast.expr, assigned: dict[str, ast.expr]) -> object:
    if isinstance(value, ast.Name) and value.id in assigned:
        value = assigned[value.id]
    try:
        return ast.literal_eval(value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return DYNAMIC


def cfg_list(text: str) -> list[str]:
    """An ini value that lists requirements, one a line or separated by ';' (setup.cfg's style);
    a line that quotes something holds a marker, whose ';' separates no requirements."""
    items = [
        line.split(";") if "'" not in line and '"' not in line else [line]
        for line in text.splitlines()
    ]
    return [item.strip() for line in items for item in line if item.strip()]


def project_name(files: ProjectFiles) -> str | None:
    table = pyproject(files)
    name = table.get("project", {}).get("name") or table.get("tool", {}).get("poetry", {}).get(
        "name"
    )
    name = name or files.ini("setup.cfg").get("metadata", "name", fallback=None)
    name = name or setup_keywords(files).get("name")
    return canonical(name) if isinstance(name, str) else None


def project_extras(files: ProjectFiles) -> tuple[str, dict[str, list[str]]]:
    """The project's extras and where they are declared."""
    optional = pyproject(files).get("project", {}).get("optional-dependencies")
    if isinstance(optional, dict) and optional:
        return "pyproject [project.optional-dependencies]", optional
    cfg = files.ini("setup.cfg")
    if cfg.has_section("options.extras_require"):
        extras = {key: cfg_list(value) for key, value in cfg.items("options.extras_require")}
        return "setup.cfg [options.extras_require]", extras
    extras_require = setup_keywords(files).get("extras_require")
    return "setup.py extras_require", extras_require if isinstance(extras_require, dict) else {}


def runtime_dependencies(files: ProjectFiles) -> Dependencies | None:
    """The project's declared runtime dependencies, from the first manifest that declares them."""
    table = pyproject(files)
    project = table.get("project", {})
    if project and "dependencies" not in project.get("dynamic", []):
        return Dependencies(
            "pyproject [project] dependencies", tuple(project.get("dependencies", []))
        )
    poetry = table.get("tool", {}).get("poetry", {}).get("dependencies")
    if isinstance(poetry, dict):
        return Dependencies("pyproject [tool.poetry.dependencies]", poetry_list(poetry))
    cfg = files.ini("setup.cfg")
    if cfg.has_option("options", "install_requires"):
        value = cfg.get("options", "install_requires")
        if not value.strip().startswith("file:"):
            return Dependencies("setup.cfg install_requires", tuple(cfg_list(value)))
        listed, _ = requirement_lines(files, value.split(":", 1)[1].strip())
        return Dependencies("setup.cfg install_requires (file:)", tuple(listed))
    install_requires = setup_keywords(files).get("install_requires")
    if install_requires is DYNAMIC:
        return Dependencies("setup.py install_requires (computed)", (), dynamic=True)
    if isinstance(install_requires, (list, tuple)):
        return Dependencies("setup.py install_requires", tuple(map(str, install_requires)))
    if files.has("requirements.txt") and not files.has("setup.py") and not project:
        listed, as_is = requirement_lines(files, "requirements.txt")
        return Dependencies(
            "requirements.txt", tuple(listed), as_is_file="requirements.txt" if as_is else None
        )
    return None


def poetry_list(table: dict[str, Any]) -> tuple[str, ...]:
    pairs = (
        (name, poetry_requirement(name, spec)) for name, spec in table.items() if name != "python"
    )
    return tuple(requirement for _, requirement in pairs if requirement)


def test_dependencies(files: ProjectFiles) -> Dependencies | None:
    """The test dependencies from the first source that declares any, in this order: PEP 735
    dependency groups, the project's extras, poetry's groups, tests_require, requirement files,
    tox's test environment."""
    for source in (
        dependency_group,
        project_extra,
        poetry_group,
        tests_require,
        requirement_file,
        tox_env,
    ):
        found = source(files)
        if found is not None:
            return found
    return None


def dependency_group(files: ProjectFiles) -> Dependencies | None:
    groups = pyproject(files).get("dependency-groups", {})
    name = next((name for name in TEST_NAMES if name in groups), None)
    if name is None:
        return None
    return Dependencies(
        f"pyproject [dependency-groups] {name}", tuple(group_items(groups, name, set()))
    )


def group_items(groups: dict[str, Any], name: str, seen: set[str]) -> list[str]:
    """A PEP 735 group's requirements, its include-group entries expanded (once each)."""
    items: list[str] = []
    seen.add(name)
    for item in groups.get(name, []):
        if isinstance(item, str):
            items.append(item)
        elif isinstance(item, dict) and item.get("include-group") not in seen:
            items += group_items(groups, str(item.get("include-group")), seen)
    return items


def project_extra(files: ProjectFiles) -> Dependencies | None:
    where, extras = project_extras(files)
    name = next((name for name in TEST_NAMES if name in extras), None)
    if name is None:
        return None
    return Dependencies(f"{where} {name}", tuple(map(str, extras[name])), extra=name)


def poetry_group(files: ProjectFiles) -> Dependencies | None:
    poetry = pyproject(files).get("tool", {}).get("poetry", {})
    for name in TEST_NAMES:
        group = poetry.get("group", {}).get(name, {}).get("dependencies")
        if isinstance(group, dict):
            return Dependencies(f"pyproject [tool.poetry.group.{name}]", poetry_list(group))
    if isinstance(poetry.get("dev-dependencies"), dict):
        return Dependencies(
            "pyproject [tool.poetry.dev-dependencies]", poetry_list(poetry["dev-dependencies"])
        )
    return None


def tests_require(files: ProjectFiles) -> Dependencies | None:
    cfg = files.ini("setup.cfg")
    if cfg.has_option("options", "tests_require"):
        return Dependencies(
            "setup.cfg tests_require", tuple(cfg_list(cfg.get("options", "tests_require")))
        )
    listed = setup_keywords(files).get("tests_require")
    if isinstance(listed, (list, tuple)):
        return Dependencies("setup.py tests_require", tuple(map(str, listed)))
    return None


def requirement_file(files: ProjectFiles) -> Dependencies | None:
    path = next((path for path in REQUIREMENT_FILES if files.has(path)), None)
    if path is None:
        return None
    listed, as_is = requirement_lines(files, path)
    return Dependencies(path, tuple(listed), as_is_file=path if as_is else None)


def tox_env(files: ProjectFiles) -> Dependencies | None:
    """The deps (and extras) of tox's base test environment: tox.ini [testenv], a pyproject's
    legacy_tox_ini, or native [tool.tox.env_run_base]; conditional and substituted lines skipped."""
    tox = pyproject(files).get("tool", {}).get("tox", {})
    if isinstance(tox.get("env_run_base"), dict):
        base = tox["env_run_base"]
        deps = [dep for dep in base.get("deps", []) if isinstance(dep, str)]
        return tox_dependencies(
            files, "pyproject [tool.tox.env_run_base]", deps, base.get("extras", [])
        )
    where, text = (
        ("pyproject legacy_tox_ini", tox.get("legacy_tox_ini"))
        if "legacy_tox_ini" in tox
        else ("tox.ini", None)
    )
    ini = files.ini(where if text is None else "pyproject.toml", text)
    section = next(
        (name for name in ini.sections() if name == "testenv" or name.startswith("testenv:py")),
        None,
    )
    if section is None:
        return None
    deps = [line.strip() for line in ini.get(section, "deps", fallback="").splitlines()]
    extras = cfg_list(ini.get(section, "extras", fallback="").replace(",", "\n"))
    return tox_dependencies(files, f"{where} [{section}]", deps, extras)


def tox_dependencies(
    files: ProjectFiles, where: str, deps: list[str], extras: list[str]
) -> Dependencies:
    listed: list[str] = []
    as_is_file = None
    for dep in deps:
        if not dep or "{" in dep or dep.split(" ", 1)[0].endswith(":"):
            continue
        if dep.startswith(("-r", "--requirement")):
            path = dep.split(None, 1)[-1].removeprefix("-r").strip()
            nested, as_is = requirement_lines(files, path)
            listed += nested
            as_is_file = path if as_is else as_is_file
        elif not dep.startswith("-"):
            listed.append(dep)
    _, project = project_extras(files)
    for extra in extras:
        listed += map(str, project.get(extra, []))
    return Dependencies(where, tuple(listed), as_is_file=as_is_file)
