"""OpenAI function-calling schemas for the agent's tools, and argument checking against them.

The schemas are the single source of truth: `check_arguments` validates a call's arguments with the
same JSON-schema subset (types, required, no unknown keys, minimums) the model was shown.
"""

from __future__ import annotations

from typing import Any

_PATH = {"type": "string", "description": "Path relative to the workspace root."}


def _tool(
    name: str, description: str, properties: dict[str, Any], required: list[str]
) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


TOOL_SCHEMAS: list[dict[str, Any]] = [
    _tool(
        "list_files",
        "List files in the workspace (recursively, sorted; .git is skipped).",
        {
            "root": {
                "type": "string",
                "description": "Directory to list, relative to the workspace root. Default '.'.",
            },
            "glob": {
                "type": ["string", "null"],
                "description": "Filter such as '*.py' (matches file "
                "names at any depth) or 'src/**/test_*.py' (matches paths).",
            },
        },
        [],
    ),
    _tool(
        "read_file",
        "Read a text file, or a range of its lines (1-based, inclusive). Long "
        "files are cut at a line/byte limit; the result says which lines were returned.",
        {
            "path": _PATH,
            "start_line": {"type": ["integer", "null"], "minimum": 1},
            "end_line": {"type": ["integer", "null"], "minimum": 1},
        },
        ["path"],
    ),
    _tool(
        "search",
        "Search text files for a string (or a Python regex). Returns 'path:line:text' lines.",
        {
            "query": {"type": "string"},
            "glob": {
                "type": ["string", "null"],
                "description": "Only search matching files, e.g. '*.py'.",
            },
            "max_results": {"type": "integer", "minimum": 1},
            "regex": {"type": "boolean", "description": "Treat query as a regular expression."},
        },
        ["query"],
    ),
    _tool(
        "apply_patch",
        "Apply a unified diff (as produced by `git diff`). Paths are relative "
        "to the workspace root, with optional a/ and b/ prefixes. Every @@ header must state the "
        "correct line counts, and context and removed lines must match the file exactly, "
        "including whitespace. Create a file with '--- /dev/null'; delete one with "
        "'+++ /dev/null' and all its lines removed; rename with 'diff --git' plus 'rename from' "
        "and 'rename to' lines. All or nothing: if any hunk fails, no file is changed, and the "
        "error shows the nearest matching lines of the file.",
        {
            "unified_diff": {"type": "string"},
        },
        ["unified_diff"],
    ),
    _tool(
        "run",
        "Run a shell command in the workspace (no network). Returns exit code, stdout "
        "and stderr (long output keeps its head and tail).",
        {
            "command": {"type": "string"},
            "timeout_sec": {
                "type": ["number", "null"],
                "exclusiveMinimum": 0,
                "description": "Seconds before the command is killed (capped by the harness).",
            },
            "env": {
                "type": ["object", "null"],
                "additionalProperties": {"type": "string"},
                "description": "Extra environment variables.",
            },
        },
        ["command"],
    ),
    _tool(
        "write_file",
        "Create or overwrite a whole file with the given content.",
        {
            "path": _PATH,
            "content": {"type": "string"},
        },
        ["path", "content"],
    ),
    _tool("remove_file", "Delete a file.", {"path": _PATH}, ["path"]),
    _tool(
        "finish",
        "Stop working: call this when the task is done (or cannot be done).",
        {
            "summary": {"type": "string", "description": "What was changed and why."},
        },
        ["summary"],
    ),
]

SCHEMAS_BY_NAME: dict[str, dict[str, Any]] = {
    s["function"]["name"]: s["function"]["parameters"] for s in TOOL_SCHEMAS
}
WRITE_TOOLS = frozenset({"write_file", "remove_file"})


class ArgumentError(ValueError):
    """The arguments do not fit the tool's schema."""


def check_arguments(tool: str, arguments: Any) -> dict[str, Any]:
    """Validate `arguments` for `tool`; returns them with integral floats made ints."""
    schema = SCHEMAS_BY_NAME[tool]
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise ArgumentError(f"arguments must be a JSON object, got {type(arguments).__name__}")
    props: dict[str, Any] = schema["properties"]
    unknown = sorted(set(arguments) - set(props))
    if unknown:
        raise ArgumentError(
            f"unknown argument(s) {', '.join(unknown)}; {tool} takes "
            f"{', '.join(props) or 'no arguments'}"
        )
    missing = [k for k in schema["required"] if arguments.get(k) is None]
    if missing:
        raise ArgumentError(f"missing required argument(s): {', '.join(missing)}")
    return {key: _check_value(f"{key}", value, props[key]) for key, value in arguments.items()}


def _check_value(name: str, value: Any, schema: dict[str, Any]) -> Any:
    types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    for kind in types:
        ok, converted = _as_type(value, kind)
        if ok:
            _check_bounds(name, converted, schema)
            if kind == "object" and isinstance(converted, dict):
                inner = schema.get("additionalProperties")
                if isinstance(inner, dict):
                    for key, item in converted.items():
                        _check_value(f"{name}.{key}", item, inner)
            return converted
    want = " or ".join(types)
    raise ArgumentError(f"{name} must be {want}, got {type(value).__name__} {_short(value)}")


def _as_type(value: Any, kind: str) -> tuple[bool, Any]:
    if kind == "null":
        return value is None, value
    if kind == "string":
        return isinstance(value, str), value
    if kind == "boolean":
        return isinstance(value, bool), value
    if isinstance(value, bool):
        return False, value
    if kind == "integer":
        if isinstance(value, float) and value.is_integer():
            return True, int(value)
        return isinstance(value, int), value
    if kind == "number":
        return isinstance(value, int | float), value
    if kind == "object":
        return isinstance(value, dict), value
    return False, value


def _check_bounds(name: str, value: Any, schema: dict[str, Any]) -> None:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return
    if "minimum" in schema and value < schema["minimum"]:
        raise ArgumentError(f"{name} must be >= {schema['minimum']}, got {value}")
    if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
        raise ArgumentError(f"{name} must be > {schema['exclusiveMinimum']}, got {value}")


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
