"""The task.yaml reference (docs/task-yaml.md) and the schema examples cannot drift from the
schema: every field has a row whose default is the model's, the examples load, and every value
an example shows for a field with a default is that default (issue 22 item 10: the taskpacks
README showed cpu 1, memory 1024 and tool timeout 60 beside defaults of 2, 4096 and 120)."""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from pytest_agentbench.schemas.task import TaskSpec

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "task-yaml.md"
EXAMPLES = {  # documents holding a task.yaml example: the fields it may leave out
    REFERENCE: {"environment.docker_image", "agent.entrypoint", "validation.hidden_tests",
                "quarantine"},
    ROOT / "taskpacks" / "README.md": None,  # None: a summary, not every field
}
ROW = re.compile(r"^\| `(?P<field>[a-z_.]+)` \| (?P<default>[^|]+?) \|", re.MULTILINE)


def _model_of(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        models = [m for m in map(_model_of, typing.get_args(annotation)) if m is not None]
        return models[0] if len(models) == 1 else None
    return None


def leaf_fields(model: type[BaseModel] = TaskSpec, prefix: str = "") -> dict[str, Any]:
    """Every leaf field's dotted path -> its default (PydanticUndefined when required)."""
    found: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        inner = _model_of(info.annotation)
        if inner is not None:
            found |= leaf_fields(inner, f"{prefix}{name}.")
        else:
            found[prefix + name] = info.get_default(call_default_factory=True)
    return found


def shown(default: Any) -> str:
    """A default as the reference's default column writes it."""
    if default is PydanticUndefined:
        return "required"
    if default is None:
        return "`none`"
    if isinstance(default, bool):
        return f"`{'true' if default else 'false'}`"
    if isinstance(default, float) and default.is_integer():
        default = int(default)
    if isinstance(default, list):
        return "`[]`" if not default else f"`{default}`"
    if isinstance(default, str) and not default:
        return '`""`'
    return f"`{default}`"


def yaml_blocks(path: Path) -> list[dict[str, Any]]:
    """The ```yaml blocks of `path` that are task files."""
    blocks = re.findall(r"```yaml\n(.*?)```", path.read_text("utf-8"), re.DOTALL)
    loaded = [yaml.safe_load(block) for block in blocks]
    return [b for b in loaded if isinstance(b, dict) and "task_spec_version" in b]


def leaves(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) and prefix + key in ("", "repo", "environment", "setup",
                                                         "validation", "agent", "artifacts",
                                                         "oracle"):
            found |= leaves(value, f"{prefix}{key}.")
        else:
            found[prefix + key] = value
    return found


def test_every_schema_field_has_a_row_with_the_models_default() -> None:
    rows = {m["field"]: m["default"].strip() for m in ROW.finditer(REFERENCE.read_text("utf-8"))}
    fields = leaf_fields()
    assert "environment.python" in fields and "agent.allow_file_write" in fields  # the walk works
    missing = sorted(set(fields) - set(rows))
    assert not missing, f"fields without a row in {REFERENCE.name}: {missing}"
    stale = sorted(set(rows) - set(fields))
    assert not stale, f"rows in {REFERENCE.name} for no schema field: {stale}"
    wrong = {name: (rows[name], shown(default)) for name, default in fields.items()
             if rows[name] != shown(default)}
    assert not wrong, f"default column (written, model) differs: {wrong}"


@pytest.mark.parametrize("doc", sorted(EXAMPLES), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_examples_load_and_show_the_real_defaults(doc: Path) -> None:
    blocks = yaml_blocks(doc)
    assert blocks, f"no task.yaml example in {doc}"
    defaults = leaf_fields()
    for block in blocks:
        TaskSpec.model_validate(block)  # every example is a valid task file
        for name, value in leaves(block).items():
            default = defaults[name]
            if default is PydanticUndefined or default in (None, "", []):
                continue  # required or optional: any example value
            assert value == default, f"{doc.name}: {name} shows {value!r}, the default is " \
                                     f"{default!r}"
    complete = EXAMPLES[doc]
    if complete is not None:  # the first example shows every field but the listed ones
        absent = sorted(set(defaults) - set(leaves(blocks[0])) - complete)
        assert not absent, f"{doc.name}'s complete example lacks {absent}"


def test_the_reference_says_what_the_agent_is_told_and_how_to_make_the_oracle_patch() -> None:
    text = REFERENCE.read_text("utf-8")
    assert "Task: <description>" in text
    assert "git diff BUG FIX -- src/ >" in text
