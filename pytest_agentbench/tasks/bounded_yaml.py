"""YAML from a taskpack, loaded safely and within bounds, and checked for text that breaks paths.

`parse_yaml` uses SafeLoader types only, refuses duplicate keys and recursive aliases, and keeps
nesting and alias expansion within MAX_YAML_DEPTH and MAX_YAML_NODES while the events stream in;
`yaml_message` makes any failure one line. `text_problems` finds strings holding a NUL or a lone
surrogate.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml

from pytest_agentbench.tasks.problems import one_line

MAX_YAML_DEPTH = 32  # nested mappings/lists; a task.yaml needs 4
MAX_YAML_NODES = 100_000  # values after expanding aliases ("billion laughs")


def parse_yaml(text: str) -> Any:
    """Load YAML safely and within bounds: SafeLoader types only, no duplicate keys, no
    recursive aliases, at most MAX_YAML_DEPTH levels of nesting and MAX_YAML_NODES values after
    expanding aliases. Every failure is a yaml.YAMLError; format it with `yaml_message`."""
    loader = _StrictLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


class _LimitError(yaml.MarkedYAMLError):
    """A document beyond the loader's bounds; reported without 'syntax error'."""


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (PyYAML silently keeps the last one) and keeps
    documents within bounds while their events stream in, before the recursive composer (or
    pydantic) sees them: deep nesting and alias bombs become one error, never a crash."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._frames: list[tuple[str | None, list[int]]] = []  # (anchor, [size]) per open node
        self._sizes: dict[str, int] = {}  # anchor -> values it expands to

    def get_event(self) -> yaml.Event:
        event: yaml.Event = super().get_event()  # type: ignore[no-untyped-call]
        self._account(event)
        return event

    def _account(self, event: yaml.Event) -> None:
        if isinstance(event, yaml.CollectionStartEvent):
            if len(self._frames) >= MAX_YAML_DEPTH:
                raise self._limit(event, f"nested more than {MAX_YAML_DEPTH} levels deep")
            self._frames.append((event.anchor, [1]))
        elif isinstance(event, yaml.CollectionEndEvent):
            anchor, (size,) = self._frames.pop()
            if anchor is not None:
                self._sizes[anchor] = size
            self._add(event, size)
        elif isinstance(event, yaml.ScalarEvent):
            if event.anchor is not None:
                self._sizes[event.anchor] = 1
            self._add(event, 1)
        elif isinstance(event, yaml.AliasEvent):
            anchor = event.anchor
            if any(open_anchor == anchor for open_anchor, _ in self._frames):
                raise self._limit(event, f"alias *{anchor} refers to a value that contains it")
            self._add(event, self._sizes.get(anchor or "", 1))

    def _add(self, event: yaml.Event, size: int) -> None:
        if not self._frames:
            return
        counter = self._frames[-1][1]
        counter[0] += size
        if counter[0] > MAX_YAML_NODES:
            raise self._limit(event, f"more than {MAX_YAML_NODES} values (after expanding aliases)")

    def _limit(self, event: yaml.Event, problem: str) -> _LimitError:
        return _LimitError(None, None, problem, event.start_mark)  # type: ignore[arg-type]

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        try:
            return super().construct_yaml_int(node)
        except ValueError:  # more digits than int() converts
            raise _LimitError(None, None, "number too large", node.start_mark) from None


_MERGE_TAG = "tag:yaml.org,2002:merge"


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE_TAG:
            continue
        key = loader.construct_object(key_node)
        if key in seen:
            raise _DuplicateKeyError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node)


class _DuplicateKeyError(yaml.constructor.ConstructorError):
    pass


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_StrictLoader.add_constructor("tag:yaml.org,2002:int", _StrictLoader.construct_yaml_int)


def yaml_message(exc: yaml.YAMLError, text: str) -> str:
    """One line for a YAML error: where it is and what is wrong."""
    if isinstance(exc, yaml.reader.ReaderError):  # a control character; it carries no mark
        position = exc.position
        line = text.count("\n", 0, position) + 1
        column = position - text.rfind("\n", 0, position)
        char = exc.character if isinstance(exc.character, int) else ord(exc.character)
        return (
            f"line {line}, column {column}: YAML syntax error: "
            f"unacceptable character #x{char:04x}: {exc.reason}"
        )
    if not isinstance(exc, yaml.MarkedYAMLError):
        return f"YAML error: {one_line(str(exc))}"
    mark = exc.problem_mark or exc.context_mark
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    if isinstance(exc, _DuplicateKeyError):
        return f"{where}{exc.problem} (YAML would silently keep only the last value)"
    if isinstance(exc, _LimitError):
        return f"{where}{exc.problem}"
    message = f"{where}YAML syntax error: {one_line(exc.problem or str(exc))}"
    if exc.context:
        context_mark = exc.context_mark
        at = f" started at line {context_mark.line + 1}" if context_mark else ""
        message += f" ({one_line(exc.context)}{at})"
    return message


def text_problems(data: Any) -> Iterator[tuple[str, str]]:
    """(field, message) for each string (key or value) holding a NUL or a lone surrogate:
    they break paths, command lines and JSON records alike."""
    stack: list[tuple[str, Any]] = [("", data)]
    seen: set[int] = set()
    while stack:
        where, value = stack.pop()
        if isinstance(value, str):
            message = _text_problem(value)
            if message:
                yield where, message
        elif isinstance(value, dict | list) and id(value) not in seen:
            seen.add(id(value))  # an alias shares its value: check it once
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(key, int):
                    name = f"{where}[{key}]"
                else:
                    name = f"{where}.{key}" if where else str(key)
                if isinstance(key, str) and _text_problem(key):
                    yield where, f"key {key!r}: {_text_problem(key)}"
                    continue
                stack.append((name, item))


def _text_problem(text: str) -> str | None:
    if "\0" in text:
        return "contains a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a character that is not valid Unicode (a lone surrogate)"
    return None
