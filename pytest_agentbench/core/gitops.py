"""Workspace snapshots and diffs, computed by git *inside* the sandbox.

Never on the host: the agent can write `.git/config` (fsmonitor, filters, pagers), and git run on
the host would execute whatever it put there. Inside the sandbox the snapshot still must not
depend on anything the agent controls, because the recorded diff is what scoring applies:

- A harness-owned git dir in the sandbox's /tmp (`Snapshotter`) with its own index and config,
  and the workspace's object store. The agent's `.git/config`, `.git/index` (assume-unchanged and
  skip-worktree bits, split index, untracked cache), `info/exclude`, hooks and HOME config are
  never read, and every setting that changes what git sees is pinned with `-c` besides.
- The stat cache is safe because only git writes that index, so its racy-entry check works as
  designed, and because git's whole-second comparison is not trusted alone: a file whose ctime
  (nanoseconds, and no tool can set it back) is newer than the previous snapshot's start, less
  RACY_MARGIN_SEC, is always hashed again. Each snapshot first checks a fingerprint of the whole
  git dir (names, types, sizes, modes, mtimes, contents); if the agent touched or removed it, the
  index is rebuilt from the base tree and every file is hashed again.
- Ignore rules are the workspace's own as they stood before the agent started (its .gitignore
  files, translated into one exclude file): a .gitignore the agent adds is recorded like any file
  but hides nothing. Caches and bytecode (EXCLUDES) are never part of a snapshot.
- In-tree .gitattributes can neither convert content on the way in (info/attributes unsets text,
  eol, filter, ident, working-tree-encoding) nor make a file binary in a diff (diffs run bare).
- Diffs travel as base64, so no byte is lost; numstat is parsed with -z; a patch that is not valid
  UTF-8 is made again with every file as an exact binary patch. `apply_command` applies a patch
  the same way: no conversion, whatever the pre-agent copy's .gitattributes say.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import re
import shlex
from dataclasses import dataclass

from pytest_agentbench.sandbox.port import ExecResult, Sandbox, SandboxError

EXCLUDES = ["**/__pycache__/**", ".pytest_cache/**", "**/*.pyc", ".agentbench/**"]
APPLY_PATCH = ".git/agentbench-final.patch"
GITDIR_PREFIX = "/tmp/.agentbench-git."
RACY_MARGIN_SEC = 2
# The agent can write .git/config; pin what would change what we read (setup-phase checks).
_GIT = (
    "git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c core.quotepath=off"
    " -c core.autocrlf=false -c core.safecrlf=false -c diff.noprefix=false"
    " -c diff.mnemonicPrefix=false -c diff.relative=false -c diff.external="
)
_PINS = {
    "core.hooksPath": "/dev/null", "core.fsmonitor": "false", "core.untrackedCache": "false",
    "core.splitIndex": "false", "core.ignoreStat": "false", "core.checkStat": "default",
    "core.trustctime": "true", "core.fileMode": "true", "core.symlinks": "true",
    "core.ignoreCase": "false", "core.precomposeUnicode": "false", "core.autocrlf": "false",
    "core.safecrlf": "false", "core.quotePath": "false", "core.excludesFile": "/dev/null",
    "core.attributesFile": "/dev/null", "core.sparseCheckout": "false",
    "core.sparseCheckoutCone": "false", "index.sparse": "false", "index.skipHash": "false",
    "feature.manyFiles": "false", "add.ignoreErrors": "false", "submodule.recurse": "false",
    "diff.ignoreSubmodules": "none", "diff.submodule": "short", "diff.noprefix": "false",
    "diff.mnemonicPrefix": "false", "diff.relative": "false", "diff.external": "",
    "diff.renames": "false", "diff.context": "3", "diff.interHunkContext": "0",
    "diff.suppressBlankEmpty": "false", "diff.orderFile": "/dev/null", "diff.algorithm": "myers",
    "diff.colorMoved": "no", "color.ui": "never", "color.diff": "never", "gc.auto": "0",
    "maintenance.auto": "false", "safe.directory": "*",
}
# No conversion on the way into the object store, whatever the in-tree .gitattributes say.
_ATTRIBUTES = b"* -text -crlf -eol -filter -ident -working-tree-encoding\n"
_DIFF = "diff --no-color --no-renames --no-ext-diff --no-textconv"
_REBUILD, _NESTED_REPO = 86, 87  # exit codes of the snapshot script
_CHUNK = 60_000  # bytes per environment variable (one string may not exceed 128 KiB)
_JUNK = " ".join(shlex.quote(f":(exclude){p}") for p in EXCLUDES)

# Every GIT_* variable goes (GIT_DIR, GIT_INDEX_FILE, GIT_LITERAL_PATHSPECS, ...), then ours.
_PRELUDE = r"""set -o pipefail
BARE=$'[core]\n\trepositoryformatversion = 0\n\tbare = true\n'
for v in $(compgen -e); do case $v in GIT_*) unset "$v";; esac; done
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_ATTR_NOSYSTEM=1 \
  GIT_TERMINAL_PROMPT=0 GIT_OBJECT_DIRECTORY="$PWD/.git/objects"
g() { git PINS "$@"; }
""".replace("PINS", " ".join("-c " + shlex.quote(f"{k}={v}") for k, v in _PINS.items()))
# What the harness git dir is now: names, types, sizes, modes, inodes and mtimes of everything in
# it, and the contents of the files git reads. Anything the agent does to it changes this.
_FP = r"""fp() { [ -d "$GD" ] && [ ! -L "$GD" ] && find "$GD" -printf '%P %y %s %m %i %T@\n' &&
  sha256sum "$GD/HEAD" "$GD/config" "$GD/index" "$GD/ref" "$GD/tracked-ignored" "$GD/binary" \
    "$GD/info/exclude" "$GD/info/attributes"; }
"""
_CHECK = '[ -n "$EXPECT" ] && [ "$(fp)" = "$EXPECT" ] || exit 86\n'
# A fresh git dir whose index holds the base tree (the first time, HEAD's) without stat data, so
# the update below hashes every file. (Seeding it from the checkout's .git/index would not save
# much: right after a checkout nearly every entry is racy or recently changed, so hashed anyway.)
_REBUILD_SCRIPT = r"""rm -rf "$GD" && mkdir -m 700 "$GD" && mkdir "$GD/refs" "$GD/info" &&
printf 'ref: refs/heads/agentbench\n' > "$GD/HEAD" && printf '%s' "$BARE" > "$GD/config" &&
printf '%s' "$ATTRS" | base64 -d > "$GD/info/attributes" && printf '* -diff\n' > "$GD/binary" &&
for v in $(compgen -e | grep '^AGENTBENCH_EXCL_' | LC_ALL=C sort); do printf '%s' "${!v}"; done |
  base64 -d > "$GD/info/exclude" || exit 1
tree=$BASE
if [ -z "$tree" ]; then tree=$(GIT_DIR="$PWD/.git" g rev-parse -q --verify 'HEAD^{tree}'); fi
export GIT_DIR="$GD" GIT_WORK_TREE="$PWD" GIT_INDEX_FILE="$GD/index"
if [ -n "$tree" ]; then g read-tree "$tree" || exit 1; else g read-tree --empty || exit 1; fi
if [ -n "$BASE" ]; then
  g ls-files -z -c -i --exclude-from="$GD/info/exclude" -- . JUNK > "$GD/tracked-ignored" || exit 1
fi
""".replace("JUNK", _JUNK)
# Brings the harness index up to date with the workspace:
# 1. every indexed file whose ctime (nanoseconds, and no tool sets it back) is newer than `ref`
#    (the previous snapshot's start, less a margin) leaves the index, so it is hashed again:
#    git's own stat check compares whole seconds only, and an mtime can be set back;
# 2. tracked entries, by git's stat check (racy entries compared by content);
# 3. files git does not know yet, under the base ignore rules; and the base files that those
#    rules ignore (`tracked-ignored`) wherever they are files again (git would not list them).
_UPDATE = r"""export GIT_DIR="$GD" GIT_WORK_TREE="$PWD" GIT_INDEX_FILE="$GD/index"
P="$GD/paths" TI="$GD/tracked-ignored"
if [ -f "$GD/ref" ]; then
  { g ls-files -z | find -files0-from - -maxdepth 0 \( -type f -o -type l \) \
      -cnewer "$GD/ref" -print0 > "$P"; } 2>/dev/null
  if [ -s "$P" ]; then g update-index --force-remove -z --stdin < "$P" || exit 1; fi
fi
touch -d "-MARGIN seconds" "$GD/ref" || exit 1
g add -u -- . JUNK || exit 1
g ls-files -z -o --exclude-from="$GD/info/exclude" -- . JUNK > "$P" || exit 1
if [ -s "$P" ] && grep -qz '/$' "$P"; then
  echo "nested git repository: $(grep -z '/$' "$P" | tr '\0' ' ' | head -c 300)" >&2
  exit 87
fi
if [ -s "$TI" ]; then
  while IFS= read -r -d '' p; do
    d=$p ok=1
    while [ "$d" != "${d%/*}" ]; do d=${d%/*}; if [ -L "$d" ]; then ok=0; break; fi; done
    if [ $ok = 1 ] && { [ -L "$p" ] || [ -f "$p" ]; }; then printf '%s\0' "$p"; fi
  done < "$TI" >> "$P"
fi
if [ -s "$P" ]; then g update-index --add --remove -z --stdin < "$P" || exit 1; fi
: > "$P"
if [ ! -e "$TI" ]; then
  g ls-files -z -c -i --exclude-from="$GD/info/exclude" -- . JUNK > "$TI" || exit 1
fi
""".replace("JUNK", _JUNK).replace(
    "MARGIN", str(RACY_MARGIN_SEC)
)
# The ignore files git reads in the workspace now (before the agent starts), with contents.
_IGNORE_FILES = r"""{ GIT_DIR="$PWD/.git" g ls-files -z -co --exclude-standard \
    -- ':(glob)**/.gitignore' |
  while IFS= read -r -d '' f; do
    if [ -f "$f" ] && [ ! -L "$f" ]; then printf '%s\0' "$f"; base64 -w0 < "$f"; printf '\0'; fi
  done
  if [ -f .git/info/exclude ] && [ ! -L .git/info/exclude ]; then
    printf ':info/exclude\0'; base64 -w0 < .git/info/exclude; printf '\0'
  fi
} | base64 -w0 && echo && mktemp -d PREFIXXXXXXXXX
""".replace("PREFIX", GITDIR_PREFIX)
# Two trees compared in a bare git dir (so no worktree, no in-tree .gitattributes; `-c core.bare`
# alone would not do: git decides bareness from the config file): patch and numstat as base64. A
# patch that is not valid UTF-8 (content or names) is made again with every file as a binary
# patch (the attributes file $BIN says `* -diff`) and odd names quoted: exact, and ASCII but for
# symlink targets, which git always diffs as text.
_DIFF_BODY = r"""g -c core.bare=true DIFF --binary "$OLD" "$NEW" > "$T" || exit 1
if ! iconv -f UTF-8 -t UTF-8 < "$T" > /dev/null 2>&1; then
  g -c core.bare=true -c core.quotePath=true -c core.attributesFile="$BIN" \
    DIFF --binary "$OLD" "$NEW" > "$T" || exit 1
fi
base64 -w0 < "$T" && echo && rm -f "$T" &&
g -c core.bare=true DIFF --numstat -z --text "$OLD" "$NEW" | base64 -w0 && echo || exit 1
""".replace("DIFF", _DIFF)
# ... in a throwaway git dir, for any two trees
_DIFF_SCRIPT = r"""D=$(mktemp -d /tmp/.agentbench-diff.XXXXXXXX) || exit 1
trap 'rm -rf "$D"' EXIT
mkdir "$D/refs" && printf 'ref: refs/heads/agentbench\n' > "$D/HEAD" &&
printf '%s' "$BARE" > "$D/config" && printf '* -diff\n' > "$D/binary" || exit 1
export GIT_DIR="$D" T="$D/patch" BIN="$D/binary"
""" + _DIFF_BODY + "echo END\n"
# ... and right after a snapshot, from $OLD to the new tree, in the harness git dir.
_SNAPSHOT_DIFF = r"""tree=$(g write-tree) || exit 1
echo "$tree"
if [ -n "$OLD" ] && [ "$OLD" != "$tree" ]; then
  ( export NEW=$tree T="$GD/patch" BIN="$GD/binary"; unset GIT_WORK_TREE GIT_INDEX_FILE
""" + _DIFF_BODY + r"""  ) || { rm -f "$GD/patch"; exit 1; }
else echo; echo; fi
echo END && fp
"""


# Applies a recorded patch to the pre-agent copy byte for byte: git apply converts content per
# the workspace's .gitattributes (eol=crlf, filters) and honours its config, so it runs against a
# throwaway git dir whose info/attributes turns every conversion off.
_APPLY_SCRIPT = r"""D=$(mktemp -d /tmp/.agentbench-apply.XXXXXXXX) || exit 1
trap 'rm -rf "$D"' EXIT
mkdir "$D/refs" "$D/info" && printf 'ref: refs/heads/agentbench\n' > "$D/HEAD" &&
printf '%s' "$ATTRS" | base64 -d > "$D/info/attributes" || exit 1
GIT_DIR="$D" GIT_WORK_TREE="$PWD" g apply --binary --whitespace=nowarn "$PATCH"
"""


def apply_command(patch_path: str = APPLY_PATCH) -> str:
    """The shell command (run in the workspace root inside a sandbox) that applies a recorded
    patch exactly as recorded: no attribute conversion, no workspace config."""
    head = (
        f"PATCH={shlex.quote(patch_path)} ATTRS={base64.b64encode(_ATTRIBUTES).decode()}\n"
    )
    return head + _PRELUDE + _APPLY_SCRIPT


class SnapshotError(SandboxError):
    """git could not read the workspace (e.g. the agent made files unreadable)."""


@dataclass(frozen=True)
class DiffStat:
    patch: str
    files: list[str]
    lines_changed: int


class Snapshotter:
    """Tree ids of one sandbox's workspace, from a harness-owned index that only git writes.

    The first snapshot hashes every file and fixes the ignore rules; later ones hash only what
    git's stat check (racy entries included) cannot rule out. `rebuilds` counts the snapshots
    that found the git dir touched or gone and started again from the base tree.
    """

    def __init__(self, sandbox: Sandbox, timeout_sec: float = 60) -> None:
        self.sandbox, self.timeout_sec = sandbox, timeout_sec
        self.gitdir: str | None = None
        self.base = ""  # the first tree; a rebuild starts from it
        self.excludes = b""
        self.fingerprint = ""
        self.rebuilds = 0
        self.removed = False  # the git dir is gone on purpose (close, or a last snapshot)

    def snapshot(self) -> str:
        """The tree id of the workspace now."""
        return self._snapshot("")[0]

    def snapshot_diff(self, old: str, last: bool = False) -> tuple[str, DiffStat]:
        """The tree id of the workspace now, and the diff from tree `old` to it (one exec).
        `last`: the git dir is removed in the same exec (as `close`)."""
        _check_tree(old)
        tree, raw = self._snapshot(old, last)
        return tree, _diffstat(self.sandbox, old, tree, raw, self.timeout_sec)

    def close(self) -> None:
        """Remove the git dir (the local sandbox's /tmp is the host's); best effort. A later
        snapshot rebuilds it from the base tree."""
        if self.gitdir is not None and not self.removed:
            self.fingerprint, self.removed = "", True
            with contextlib.suppress(SandboxError):
                self.sandbox.exec(f"rm -rf {shlex.quote(self.gitdir)}", timeout_sec=30)

    def _snapshot(self, old: str, last: bool = False) -> tuple[str, tuple[bytes, bytes]]:
        end = _SNAPSHOT_DIFF + ('rm -rf "$GD"\n' if last else "")
        self.removed = False
        if self.gitdir is None:
            self._start()
            result = self._exec(_REBUILD_SCRIPT + _UPDATE + end, old)
        else:
            result = self._exec(_CHECK + _UPDATE + end, old)
            if result.exit_code == _REBUILD and not result.timed_out:
                self.rebuilds += 1
                result = self._exec(_REBUILD_SCRIPT + _UPDATE + end, old)
        accepted = self._accept(result)
        if last:
            self.fingerprint, self.removed = "", True
        return accepted

    def _start(self) -> None:
        result = self.sandbox.exec(
            _PRELUDE + _IGNORE_FILES, timeout_sec=self.timeout_sec, full_output=True
        )
        text = result.full_stdout if result.full_stdout is not None else result.stdout
        lines = text.split("\n")
        if not result.ok or len(lines) != 3 or not lines[1].startswith(GITDIR_PREFIX):
            raise SnapshotError(
                f"cannot start a snapshot (exit {result.exit_code}, timed out "
                f"{result.timed_out}, {len(lines)} lines): {result.stderr.strip()[-300:]}"
            )
        fields = _b64(lines[0]).split(b"\0")
        sources = {fields[i]: _b64(fields[i + 1].decode()) for i in range(0, len(fields) - 1, 2)}
        self.excludes = base_excludes(sources)
        self.gitdir = lines[1]

    def _exec(self, script: str, old: str) -> ExecResult:
        assert self.gitdir is not None
        excl = base64.b64encode(self.excludes).decode()
        env = {
            f"AGENTBENCH_EXCL_{i // _CHUNK:05d}": excl[i : i + _CHUNK]
            for i in range(0, len(excl), _CHUNK)
        }
        env["EXPECT"] = self.fingerprint
        head = (
            f"GD={shlex.quote(self.gitdir)} BASE={shlex.quote(self.base)} OLD={old}"
            f" ATTRS={base64.b64encode(_ATTRIBUTES).decode()}\n"
        )
        return self.sandbox.exec(
            head + _PRELUDE + _FP + script, timeout_sec=self.timeout_sec, env=env,
            full_output=True,
        )

    def _accept(self, result: ExecResult) -> tuple[str, tuple[bytes, bytes]]:
        text = result.full_stdout if result.full_stdout is not None else result.stdout
        lines = text.split("\n", 4)
        if (not result.ok or len(lines) != 5 or not _is_tree(lines[0]) or lines[3] != "END"
                or not lines[4].strip()):
            self.fingerprint = ""  # whatever git left behind is rebuilt next time
            what = "a nested git repository" if result.exit_code == _NESTED_REPO else "git"
            detail = result.stderr.strip()[-300:] or "the diff is too large to record"
            raise SnapshotError(f"git snapshot failed ({what}): {detail}")
        tree, self.fingerprint = lines[0], lines[4].rstrip("\n")
        self.base = self.base or tree
        return tree, (_b64(lines[1]), _b64(lines[2]))


def snapshot_tree(sandbox: Sandbox, timeout_sec: float = 60) -> str:
    """The tree id of the workspace as it is now (every file is hashed; `Snapshotter` keeps a
    stat cache between calls)."""
    snapshotter = Snapshotter(sandbox, timeout_sec)
    try:
        return snapshotter.snapshot()
    finally:
        snapshotter.close()


def diff_trees(sandbox: Sandbox, old: str, new: str, timeout_sec: float = 60) -> DiffStat:
    """The patch from tree `old` to tree `new`, byte for byte, with the exact changed paths."""
    if old == new:
        return DiffStat("", [], 0)
    return _diffstat(sandbox, old, new, _diff(sandbox, old, new, timeout_sec), timeout_sec)


def _diffstat(
    sandbox: Sandbox, old: str, new: str, raw: tuple[bytes, bytes], timeout_sec: float
) -> DiffStat:
    if old == new:
        return DiffStat("", [], 0)
    patch_bytes, numstat = raw
    try:
        patch = patch_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:  # left: a symlink target that is not UTF-8
        raise SnapshotError(
            "a symlink's target is not valid UTF-8, so the change cannot be recorded"
        ) from exc
    files, lines = parse_numstat_z(numstat)
    return DiffStat(patch, files, lines)


def _diff(sandbox: Sandbox, old: str, new: str, timeout_sec: float) -> tuple[bytes, bytes]:
    _check_tree(old)
    _check_tree(new)
    head = f"OLD={old} NEW={new}\n"
    result = sandbox.exec(
        head + _PRELUDE + _DIFF_SCRIPT, timeout_sec=timeout_sec, full_output=True
    )
    text = result.full_stdout if result.full_stdout is not None else result.stdout
    lines = text.split("\n")
    if not result.ok or len(lines) != 4 or lines[2] != "END" or lines[3]:
        detail = result.stderr.strip()[-300:] or "the diff is too large to record"
        raise SnapshotError(f"git diff failed: {detail}")
    return _b64(lines[0]), _b64(lines[1])


def _is_tree(text: str) -> bool:
    return re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", text) is not None


def _check_tree(text: str) -> None:
    if not _is_tree(text):
        raise SnapshotError(f"not a tree id: {text!r}")


def parse_numstat_z(data: bytes) -> tuple[list[str], int]:
    """Changed paths (sorted, exact) and added + removed lines from `git diff --numstat -z`.

    Each record is `added TAB removed TAB path NUL`; with renames, `added TAB removed TAB NUL
    old NUL new NUL` (both paths are changed). Binary files count no lines (`-`)."""
    fields = data.split(b"\0")
    files: set[str] = set()
    lines, i = 0, 0
    while i < len(fields):
        record = fields[i]
        i += 1
        if not record:
            continue
        added, removed, path = (record.split(b"\t", 2) + [b"", b""])[:3]
        lines += sum(int(n) for n in (added, removed) if n.isdigit())
        if path:
            files.add(path.decode("utf-8", "replace"))
        else:
            files.update(p.decode("utf-8", "replace") for p in fields[i : i + 2] if p)
            i += 2
    return sorted(files), lines


def _b64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise SnapshotError(f"git output is incomplete ({exc})") from exc


# -- ignore rules ---------------------------------------------------------------------------------
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


# -- setup-phase checks (the workspace's own repository, before the agent) -----------------------
def dirty_tracked_files(sandbox: Sandbox, timeout_sec: float = 60) -> tuple[list[str], str]:
    """Tracked files changed since checkout, and `git diff --stat` (setup must leave none)."""
    result = sandbox.exec(
        f"{_GIT} status --porcelain --untracked-files=no && echo '@@stat@@' && "
        f"{_GIT} diff --stat HEAD",
        timeout_sec=timeout_sec,
    )
    if not result.ok:
        raise SandboxError(f"git status failed: {result.stderr.strip()[-300:]}")
    status, _, stat = result.stdout.partition("@@stat@@\n")
    files = sorted(line[3:] for line in status.splitlines() if line.strip())
    return files, stat.strip()


def untracked_files(sandbox: Sandbox, timeout_sec: float = 60) -> list[str]:
    """Files in the workspace that git does not track, ignored ones included, minus the junk
    that is never part of a snapshot (caches, bytecode)."""
    result = sandbox.exec(f"{_GIT} ls-files --others -z -- . {_JUNK}", timeout_sec=timeout_sec)
    if not result.ok:
        raise SnapshotError(f"git ls-files failed: {result.stderr.strip()[-300:]}")
    return sorted(name for name in result.stdout.split("\0") if name)
