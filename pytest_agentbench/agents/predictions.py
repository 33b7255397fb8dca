"""predictions: the simplest agent. It scores patches computed elsewhere, one
per task, from a file in SWE-bench's format:

    {"instance_id": "fix-mean-off-by-one", "model_patch": "diff --git ...",
     "model_name_or_path": "my-agent@v3"}

JSON lines, or one JSON document (a list of such objects, or a mapping from id to object, as
SWE-bench's older files are); `task_id` may stand for `instance_id`, and a null `model_patch`
means no patch. The patch goes through the tools (`apply_patch`), so it meets the task's edit
policy, protection and scoring like any agent's change:

    no prediction for the task     AGENT_GAVE_UP  NO_PREDICTION (never a pass)
    an empty patch                 AGENT_GAVE_UP  EMPTY_PREDICTION
    a patch that does not apply    TOOL_ERROR     PATCH_REJECTED (or the refusal's error type)

The model name goes into the record's `model` block (provider `predictions`). A file that cannot
be read, or an entry without an id or with a patch that is not text, is refused as a whole with
one line naming the file, the line (or entry) and the field; so is an id given twice.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_agentbench.agents.port import AgentContext, AgentError, AgentOutcome
from pytest_agentbench.schemas.records import ModelInfo
from pytest_agentbench.schemas.taxonomy import Reason
from pytest_agentbench.tasks.taskpack_files import UnsafeFileError, read_regular_file

MAX_PREDICTIONS_BYTES = 512 << 20  # SWE-bench's full split of patches is a few MB
ID_FIELDS = ("instance_id", "task_id")


class PredictionsError(ValueError):
    """A predictions file that cannot be used: one line naming the file and the field."""


@dataclass(frozen=True)
class Prediction:
    task_id: str
    patch: str
    model: str | None
    where: str  # "line 3" or "entry 3", for messages


def load_predictions(path: Path) -> dict[str, Prediction]:
    """Every prediction of the file, by task id; PredictionsError (one line) when refused."""
    try:
        raw = read_regular_file(path, MAX_PREDICTIONS_BYTES)
        text = raw.decode("utf-8")
    except FileNotFoundError:
        raise PredictionsError(f"predictions file {path}: not found") from None
    except UnsafeFileError as exc:
        raise PredictionsError(f"predictions file {path}: {exc}") from None
    except OSError as exc:
        raise PredictionsError(f"predictions file {path}: cannot read: "
                               f"{exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise PredictionsError(f"predictions file {path}: not UTF-8 text (byte {exc.start})"
                               ) from None
    entries = _entries(path, text)
    found: dict[str, Prediction] = {}
    for where, entry, key in entries:
        prediction = _prediction(path, where, entry, key)
        first = found.get(prediction.task_id)
        if first is not None:
            raise PredictionsError(f"predictions file {path}: {where}: instance_id "
                                   f"{prediction.task_id!r} given twice (first at {first.where})")
        found[prediction.task_id] = prediction
    return found


def file_sha256(path: Path) -> str:
    return hashlib.sha256(read_regular_file(path, MAX_PREDICTIONS_BYTES)).hexdigest()


def _entries(path: Path, text: str) -> list[tuple[str, Any, str | None]]:
    """(where, entry, the mapping key it was stored under) of a JSON document or JSON lines."""
    stripped = text.lstrip()
    if stripped.startswith("["):
        data = _json(path, text, "the file")
        return [(f"entry {i}", e, None) for i, e in enumerate(data, 1)]
    if stripped.startswith("{"):
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            data = None  # JSON lines: one object per line
        if isinstance(data, dict) and "model_patch" not in data and data \
                and all(isinstance(entry, dict) for entry in data.values()):
            return [(f"entry {key!r}", entry, key) for key, entry in data.items()]
    entries: list[tuple[str, Any, str | None]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            entries.append((f"line {number}", _json(path, line, f"line {number}"), None))
    if not entries:
        raise PredictionsError(f"predictions file {path}: no predictions in it")
    return entries


def _json(path: Path, text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        detail = f" ({exc.msg} at column {exc.colno})" if isinstance(exc, json.JSONDecodeError) \
            else ""
        raise PredictionsError(f"predictions file {path}: {where}: not valid JSON{detail}"
                               ) from None


def _prediction(path: Path, where: str, entry: Any, key: str | None) -> Prediction:
    def fail(message: str) -> PredictionsError:
        return PredictionsError(f"predictions file {path}: {where}: {message}")

    if not isinstance(entry, dict):
        raise fail(f"expected an object with instance_id and model_patch, got "
                   f"{type(entry).__name__}")
    task_id = next((entry[f] for f in ID_FIELDS if entry.get(f) is not None), key)
    if not isinstance(task_id, str) or not task_id.strip():
        raise fail("instance_id (or task_id): required, the task's id as a string")
    if "model_patch" not in entry:
        raise fail("model_patch: required (a unified diff, or null for no patch)")
    patch = entry["model_patch"]
    if patch is not None and not isinstance(patch, str):
        raise fail(f"model_patch: expected a string or null, got {type(patch).__name__}")
    model = entry.get("model_name_or_path")
    if model is not None and not isinstance(model, str):
        raise fail(f"model_name_or_path: expected a string, got {type(model).__name__}")
    return Prediction(task_id.strip(), patch or "", model, where)


class PredictionsAgent:
    """Applies the task's patch from a predictions file (SWE-bench's format) through the tools:
    `predictions` names the file (a variant's param, `predictions:FILE`, or
    --agentbench-predictions FILE); `sha256` is the file's hash when the variant was made, so
    the variant's config hash changes with the file's content."""

    name = "predictions"

    def __init__(self, predictions: str | None = None, sha256: str | None = None) -> None:
        self.predictions, self.sha256 = predictions, sha256

    @staticmethod
    def check_params(params: dict[str, Any]) -> None:
        """Before the run: the file exists and every entry is usable (PredictionsError)."""
        path = params.get("predictions")
        if not isinstance(path, str) or not path:
            raise PredictionsError("params predictions: required, the path of a predictions "
                                   "file (JSONL or JSON, SWE-bench's fields)")
        load_predictions(Path(path))

    def run(self, ctx: AgentContext) -> AgentOutcome:
        path = Path(str(self.predictions or ctx.params.get("predictions") or ""))
        try:
            found = load_predictions(path)
        except PredictionsError as exc:  # it was read before the run: it changed since
            raise AgentError(Reason.SANDBOX_ERROR, str(exc), "PREDICTIONS_UNREADABLE") from None
        prediction = found.get(ctx.task.id)
        if prediction is None:
            return AgentOutcome("no_prediction", Reason.AGENT_GAVE_UP, "NO_PREDICTION",
                                f"{path.name} has no prediction for {ctx.task.id}")
        model = ModelInfo(provider="predictions", name=prediction.model or "unknown")
        if not prediction.patch.strip():
            return AgentOutcome("no_prediction", Reason.AGENT_GAVE_UP, "EMPTY_PREDICTION",
                                f"the prediction for {ctx.task.id} ({prediction.where} of "
                                f"{path.name}) is an empty patch", model=model)
        result = ctx.toolbox.call("apply_patch", {"unified_diff": prediction.patch})
        if not result.ok:
            return AgentOutcome("patch_rejected", Reason.TOOL_ERROR,
                                result.error_type or "PATCH_REJECTED",
                                f"the prediction for {ctx.task.id} ({prediction.where} of "
                                f"{path.name}) does not apply: {result.error_message}",
                                model=model, steps=1)
        digest = hashlib.sha256(prediction.patch.encode()).hexdigest()[:12]
        return AgentOutcome("done", summary=f"applied the prediction of {model.name} "
                            f"({prediction.where} of {path.name}, sha256 {digest})",
                            model=model, steps=1)
