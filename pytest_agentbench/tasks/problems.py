"""Turn a TaskSpec ValidationError into one `(field, message)` line per problem.

Pydantic's own messages name types and codes; these name what YAML shows: "expected a whole
number, got 'ten'", "unknown key (did you mean 'validation'?)". A missing field that a typo'd key
already explains is not reported twice.
"""

from __future__ import annotations

import datetime
import difflib
from collections.abc import Iterable, Sequence
from typing import Any, get_args

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from pytest_agentbench.schemas.task import TASK_SPEC_VERSION, TaskSpec


def field_messages(exc: ValidationError) -> list[tuple[str, str]]:
    """`(dotted field path, one-line message)` for each error worth reporting, in pydantic order."""
    errors = exc.errors(include_url=False)
    missing = {error["loc"] for error in errors if error["type"] == "missing"}
    lines: list[tuple[str, str]] = []
    for error in errors:
        loc = error["loc"]
        if error["type"] == "missing" and _typo_explains_missing(loc, errors):
            continue
        lines.append((_field_path(loc, error), _error_message(error, missing)))
    return lines


def _typo_explains_missing(loc: tuple[int | str, ...], errors: Iterable[ErrorDetails]) -> bool:
    """`validaton:` gives 'unknown key (did you mean ...)'; the matching 'missing' adds nothing."""
    for error in errors:
        other = error["loc"]
        same_parent = other[:-1] == loc[:-1]
        if error["type"] == "extra_forbidden" and same_parent and _suggestion(other) == loc[-1]:
            return True
    return False


def _field_path(loc: tuple[int | str, ...], error: ErrorDetails) -> str:
    text = ""
    for index, part in enumerate(loc):
        key_position = error["type"] == "invalid_key" and index == len(loc) - 1
        if isinstance(part, int) and not key_position:
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def _model_at(loc: Sequence[int | str]) -> type[BaseModel] | None:
    """The pydantic model that holds the keys at `loc` (list indexes are stepped over)."""
    model: type[BaseModel] = TaskSpec
    for part in loc:
        if isinstance(part, int):
            continue
        info = model.model_fields.get(part)
        nested = _nested_model(info.annotation) if info is not None else None
        if nested is None:
            return None
        model = nested
    return model


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):  # Optional[...], list[...]
        found = _nested_model(arg)
        if found is not None:
            return found
    return None


def _suggestion(loc: tuple[int | str, ...]) -> str | None:
    model = _model_at(loc[:-1])
    if model is None:
        return None
    close = difflib.get_close_matches(str(loc[-1]), list(model.model_fields), n=1, cutoff=0.6)
    return close[0] if close else None


def _unknown_key_message(loc: tuple[int | str, ...]) -> str:
    suggestion = _suggestion(loc)
    if suggestion is not None:
        return f"unknown key (did you mean {suggestion!r}?)"
    model = _model_at(loc[:-1])
    if model is None:
        return "unknown key"
    return f"unknown key (expected one of: {', '.join(model.model_fields)})"


_EXPECTED = {
    "string_type": "a string",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "finite_number": "a finite number",
    "int_parsing_size": "a whole number of sensible size",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "a list",
    "model_type": "a mapping",
    "dict_type": "a mapping",
}
_BOUNDS = {
    "greater_than": ("gt", ">"),
    "greater_than_equal": ("ge", ">="),
    "less_than": ("lt", "<"),
    "less_than_equal": ("le", "<="),
}


def _error_message(error: ErrorDetails, missing: set[tuple[int | str, ...]]) -> str:
    kind, loc, value = error["type"], error["loc"], error.get("input")
    ctx: dict[str, Any] = dict(error.get("ctx") or {})
    got = show(value)
    if kind == "missing":
        if loc == ("task_spec_version",):
            return f"field required (add 'task_spec_version: {TASK_SPEC_VERSION}')"
        return "field required"
    if kind == "extra_forbidden":
        return _unknown_key_message(loc)
    if kind == "invalid_key":
        return f"keys must be strings, got {got}"
    if kind == "literal_error":
        expected = str(ctx.get("expected", "")).replace(" or ", ", ")
        one_of = "one of " if "," in expected else ""
        return f"expected {one_of}{expected}, got {got}"
    if kind == "string_unicode":
        return "expected UTF-8 text, got binary data"
    if kind in _EXPECTED:
        quote = " (quote it in YAML)" if kind == "string_type" and _is_scalar(value) else ""
        return f"expected {_EXPECTED[kind]}, got {got}{quote}"
    if kind == "string_pattern_mismatch":
        return f"expected a string matching {ctx.get('pattern')}, got {got}"
    if kind in ("string_too_short", "too_short"):
        least = ctx.get("min_length", 1)
        if kind == "string_too_short" and least == 1:
            return "expected a non-empty string, got an empty one"
        unit = "characters" if kind == "string_too_short" else "items"
        return f"expected at least {least} {unit}, got {got}"
    if kind in ("string_too_long", "too_long"):
        unit = "characters" if kind == "string_too_long" else "items"
        actual = len(value) if isinstance(value, str | list | dict) else ctx.get("actual_length")
        found = f"{actual} {unit}" if actual is not None else got
        return f"expected at most {ctx.get('max_length')} {unit}, got {found}"
    if kind in _BOUNDS:
        key, symbol = _BOUNDS[kind]
        return f"expected a number {symbol} {_number(ctx.get(key))}, got {got}"
    message = one_line(error["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(prefix)
    if isinstance(value, str) and repr(value) not in message:
        message += f" (in {got})"
    return message


def _is_scalar(value: object) -> bool:
    return isinstance(value, bool | int | float | datetime.date)


def _number(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def show(value: object) -> str:
    """A found value, in YAML words, short enough for one line."""
    if value is None:
        return "an empty value"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, int) and abs(value) >= 10**60:
        return "a number with more than 60 digits"
    text = repr(value) if isinstance(value, str | bytes) else str(value)
    text = one_line(text)
    return text if len(text) <= 60 else text[:57] + "..."


def one_line(text: str) -> str:
    return " ".join(text.split())
