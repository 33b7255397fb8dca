"""The environment cache's key (core/envcache.py `cache_key`) covers every task field that shapes
what a setup leaves or whether it may run (issue 20 item 2).

The task schema is walked recursively: every field must be keyed (KEYED_TASK_FIELDS) or named
irrelevant to setup, with why (SETUP_IRRELEVANT), so a field added later cannot be left out of
the key silently. Each keyed field, and each input from outside the task file, changes the key.
"""

from __future__ import annotations

import copy
import types
import typing
from typing import Any

import pytest
from pydantic import BaseModel

from pytest_agentbench.core.envcache import KEYED_TASK_FIELDS, SETUP_IRRELEVANT, cache_key
from pytest_agentbench.schemas.task import TaskSpec

BASE: dict[str, Any] = {
    "task_spec_version": 1,
    "id": "t",
    "suite": "s",
    "repo": {"url": "../../_shared/minilib.bundle", "commit": "a" * 40},
    "setup": {"commands": ["pip install -e ."], "capture": ["pip freeze"]},
    "validation": {"failing_command": "pytest -x", "passing_command": "pytest -x"},
}
# a valid value other than the default, for every keyed field
OTHER_VALUE: dict[str, Any] = {
    "repo.url": "../../_shared/other.bundle",
    "repo.commit": "b" * 40,
    "environment.docker_image": "python:3.12-slim",
    "environment.workdir": "/src",
    "environment.network_policy": "setup_only",
    "environment.cpu_limit": 1,
    "environment.mem_limit_mb": 512,
    "environment.pids_limit": 64,
    "environment.disk_limit_mb": 64,
    "environment.setup_timeout_sec": 60,
    "environment.tool_timeout_sec": 30,
    "setup.commands": ["pip install -e .", "true"],
    "setup.capture": ["pip freeze", "cp /dev/null /env/x.pth"],
    "artifacts.redact": ["TOKEN"],
}
INPUTS = {"commit": "c" * 40, "image": "sha256:img", "engine": "DockerSandboxFactory",
          "pip_cache": None}


def model_of(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model an annotation holds (`Model`, `Model | None`), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        models = [m for m in map(model_of, typing.get_args(annotation)) if m is not None]
        return models[0] if len(models) == 1 else None
    return None


def leaf_fields(model: type[BaseModel], prefix: str = "") -> set[str]:
    found: set[str] = set()
    for name, info in model.model_fields.items():
        inner = model_of(info.annotation)
        if inner is not None:
            found |= leaf_fields(inner, f"{prefix}{name}.")
        else:
            found.add(prefix + name)
    return found


def spec_with(path: str | None = None, value: Any = None) -> TaskSpec:
    data = copy.deepcopy(BASE)
    if path is not None:
        *parents, last = path.split(".")
        node = data
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return TaskSpec.model_validate(data)


def key(spec: TaskSpec, **inputs: Any) -> str:
    return cache_key(spec, **{**INPUTS, **inputs})


def test_every_task_field_is_keyed_or_declared_irrelevant_to_setup() -> None:
    fields = leaf_fields(TaskSpec)
    keyed, irrelevant = set(KEYED_TASK_FIELDS), set(SETUP_IRRELEVANT)
    assert "setup.capture" in fields and "environment.disk_limit_mb" in fields  # the walk works
    assert not keyed & irrelevant, f"both keyed and irrelevant: {sorted(keyed & irrelevant)}"
    missing = fields - keyed - irrelevant
    assert not missing, (
        f"task fields neither in the env-cache key nor declared irrelevant to setup: "
        f"{sorted(missing)}; add each to KEYED_TASK_FIELDS or SETUP_IRRELEVANT (with why) in "
        "pytest_agentbench/core/envcache.py"
    )
    stale = (keyed | irrelevant) - fields
    assert not stale, f"no such task fields: {sorted(stale)}"
    assert all(why.strip() for why in SETUP_IRRELEVANT.values())


# keyed, but with one valid value only: the runner image's Python (schemas/task.py)
ONE_VALUE = {"environment.python"}


@pytest.mark.parametrize("path", sorted(set(KEYED_TASK_FIELDS) - ONE_VALUE))
def test_each_keyed_field_changes_the_key(path: str) -> None:
    assert path in OTHER_VALUE, f"give {path} another valid value in OTHER_VALUE"
    changed = spec_with(path, OTHER_VALUE[path])
    assert changed != spec_with(), f"{OTHER_VALUE[path]!r} is {path}'s default"
    assert key(changed) != key(spec_with())


@pytest.mark.parametrize("name", ["commit", "image", "engine", "pip_cache"])
def test_each_input_from_outside_the_task_file_changes_the_key(name: str) -> None:
    assert key(spec_with(), **{name: "something-else"}) != key(spec_with())


def test_tasks_that_differ_only_in_names_and_validation_share_the_key() -> None:
    base = key(spec_with())
    assert key(spec_with("id", "u")) == base
    assert key(spec_with("labels", ["x"])) == base
    assert key(spec_with("validation", {"failing_command": "false",
                                        "passing_command": "true"})) == base
    assert key(spec_with("environment.timeout_sec", 10)) == base
