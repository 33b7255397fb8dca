"""The workspace's own ignore rules, as they stood before the agent started, as one exclude file.

A snapshot must not hide what the agent adds behind a .gitignore it wrote, so gitops reads the
ignore files once (IGNORE_FILES) and translates them here into patterns relative to the root,
with git's precedence kept: deeper files win, and within a file the last matching line.
"""

from __future__ import annotations

import re


def base_excludes(sources: dict[bytes, bytes]) -> bytes:
    """One exclude file (patterns relative to the workspace root) equal to the given ignore files:
    `:info/exclude` first, then every `<dir>/.gitignore` by depth, so that, as in git, the deeper
    file wins and within a file the last matching line."""
    out: list[bytes] = []
    if b":info/exclude" in sources:
        out += _patterns(b"", sources[b":info/exclude"])
    ignores = [p for p in sources if p.endswith(b".gitignore")]
    for path in sorted(ignores, key=lambda p: (p.count(b"/"), p)):
        if path == b".gitignore" or path.endswith(b"/.gitignore"):
            out += _patterns(path[: -len(b".gitignore")].rstrip(b"/"), sources[path])
    return b"".join(line + b"\n" for line in out)


_GLOB_CHARS = re.compile(rb"([*?\[\\])")


def _patterns(directory: bytes, content: bytes) -> list[bytes]:
    """The lines of one .gitignore in `directory`, rewritten to be relative to the root."""
    prefix = b"/" + _GLOB_CHARS.sub(rb"\\\1", directory) + b"/" if directory else b""
    out = []
    for raw in content.removeprefix(b"\xef\xbb\xbf").split(b"\n"):
        line = _trim_trailing_spaces(raw)
        if not line or line.startswith(b"#"):
            continue
        if not prefix:
            out.append(line)
            continue
        negated = line.startswith(b"!")
        body = line[1:] if negated else line
        dir_only = body.endswith(b"/")
        body = body.rstrip(b"/") if dir_only else body
        if not body:
            continue
        # with a slash it is anchored to the .gitignore's directory, else a name at any depth
        body = prefix + (body.removeprefix(b"/") if b"/" in body else b"**/" + body)
        out.append((b"!" if negated else b"") + body + (b"/" if dir_only else b""))
    return out


def _trim_trailing_spaces(line: bytes) -> bytes:
    """git's rule: trailing spaces go unless escaped with a backslash."""
    last_space, i = None, 0
    while i < len(line):
        char = line[i : i + 1]
        if char == b" ":
            last_space = i if last_space is None else last_space
        elif char == b"\\":
            i += 1
            if i >= len(line):
                return line
            last_space = None
        else:
            last_space = None
        i += 1
    return line if last_space is None else line[:last_space]
