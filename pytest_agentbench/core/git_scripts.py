"""The shell text that gitops runs inside the sandbox, and the git settings it pins.

Every script starts with PRELUDE (every GIT_* variable unset, system and global config off, `g`
= git with every setting that changes what git sees pinned by `-c`). The snapshot scripts work in
the harness git dir $GD: UNCHANGED notes the start and stops early when nothing changed since
$REF, REBUILD_SCRIPT makes the git dir afresh from the base tree, UPDATE brings its index up to
date with the workspace, SNAPSHOT_DIFF writes the tree and diffs it from $OLD, and FP and CHECK
notice when anything else touched the git dir. CHAIN, AFTER_BIG and AFTER_TAIL make the snapshot
after a command, in its exec. APPLY_SCRIPT applies a recorded patch with every attribute
conversion off. Why each step is there is in core/gitops.py.
"""

from __future__ import annotations

import re
import shlex

EXCLUDES = ["**/__pycache__/**", ".pytest_cache/**", "**/*.pyc", ".agentbench/**"]
GITDIR_PREFIX = "/tmp/.agentbench-git."
RACY_MARGIN_SEC = 2
# On a filesystem the sandbox's own kernel stamps, with nanosecond ctimes, a change after a
# snapshot's start is dated at most a clock tick or two (4-10 ms) before it: there the margin is
# FINE_MARGIN_US. Elsewhere (a network or FUSE filesystem, whose server stamps ctimes with its
# own clock; whole-second ctimes) it stays RACY_MARGIN_SEC. START_SCRIPT reports which.
FINE_MARGIN_US = 20_000
LOCAL_FILESYSTEMS = frozenset({"ext2/ext3", "xfs", "btrfs", "tmpfs", "overlayfs"})


def margin_us(facts: str) -> int:
    """The racy margin for a workspace, from START_SCRIPT's facts line (its root's ctime as
    `stat -c %z` prints it, `|`, its filesystem type): the fine one only for a local filesystem
    whose ctime has a non-zero fraction of a second; anything else, or unreadable, the wide one."""
    ctime, _, kind = facts.partition("|")
    fraction = re.search(r"\.(\d{9}) ", ctime)
    fine = kind.strip() in LOCAL_FILESYSTEMS and fraction is not None and int(fraction[1]) > 0
    return FINE_MARGIN_US if fine else RACY_MARGIN_SEC * 1_000_000
# The agent can write .git/config; pin what would change what we read (setup-phase checks).
GIT = (
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
ATTRIBUTES = b"* -text -crlf -eol -filter -ident -working-tree-encoding\n"
_DIFF = "diff --no-color --no-renames --no-ext-diff --no-textconv"
REBUILD_EXIT, NESTED_REPO_EXIT = 86, 87  # exit codes of the snapshot script
JUNK = " ".join(shlex.quote(f":(exclude){p}") for p in EXCLUDES)

# Every GIT_* variable goes (GIT_DIR, GIT_INDEX_FILE, GIT_LITERAL_PATHSPECS, ...), then ours.
PRELUDE = r"""set -o pipefail
BARE=$'[core]\n\trepositoryformatversion = 0\n\tbare = true\n'
for v in ${!GIT_@}; do unset "$v"; done
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_ATTR_NOSYSTEM=1 \
  GIT_TERMINAL_PROMPT=0 GIT_OBJECT_DIRECTORY="$PWD/.git/objects"
g() { git PINS "$@"; }
""".replace("PINS", " ".join("-c " + shlex.quote(f"{k}={v}") for k, v in _PINS.items()))
# What the harness git dir is now: names, types, sizes, modes, inodes, mtimes and ctimes of
# everything in it (its object store included; hashed, so the line stays short however many
# objects there are), and the contents of the files git reads. Anything the agent does to it
# changes this: no tool sets a ctime back.
FP = r"""export GIT_OBJECT_DIRECTORY="$GD/objects"
fp() { [ -d "$GD" ] && [ ! -L "$GD" ] && find "$GD" -printf '%P %y %s %m %i %T@ %C@\n' |
  sha256sum - "$GD/HEAD" "$GD/config" "$GD/index" "$GD/ref" "$GD/tracked-ignored" "$GD/binary" \
    "$GD/info/exclude" "$GD/info/attributes"; }
"""
CHECK = '[ -n "$EXPECT" ] && [ "$(fp)" = "$EXPECT" ] || exit 86\n'
# A fresh git dir whose index holds the base tree (the first time, HEAD's) without stat data, so
# the update below hashes every file. (Seeding it from the checkout's .git/index would not save
# much: right after a checkout nearly every entry is racy or recently changed, so hashed anyway.)
REBUILD_SCRIPT = r"""if [ -d "$GD" ] && [ ! -L "$GD" ] && [ -d "$GD/objects" ]; then
  rm -rf "$GD.prev" && mv "$GD/objects" "$GD.prev" || exit 1
fi
rm -rf "$GD" && mkdir -m 700 "$GD" && mkdir "$GD/refs" "$GD/info" "$GD/objects" &&
printf 'ref: refs/heads/agentbench\n' > "$GD/HEAD" && printf '%s' "$BARE" > "$GD/config" &&
printf '%s' "$ATTRS" | base64 -d > "$GD/info/attributes" && printf '* -diff\n' > "$GD/binary" &&
for v in $(compgen -e | grep '^AGENTBENCH_EXCL_' | LC_ALL=C sort); do printf '%s' "${!v}"; done |
  base64 -d > "$GD/info/exclude" || exit 1
tree=$BASE
if [ -z "$tree" ]; then
  tree=$(GIT_DIR="$PWD/.git" GIT_OBJECT_DIRECTORY="$PWD/.git/objects" \
         g rev-parse -q --verify 'HEAD^{tree}')
fi
export GIT_DIR="$GD" GIT_WORK_TREE="$PWD" GIT_INDEX_FILE="$GD/index"
if [ -n "$tree" ]; then
  alt="$PWD/.git/objects"; [ -d "$GD.prev" ] && alt="$GD.prev:$alt"
  { GIT_ALTERNATE_OBJECT_DIRECTORIES="$alt" g rev-list --objects --missing=allow-any "$tree" &&
    if [ -n "$OLD" ] && [ "$OLD" != "$tree" ]; then
      GIT_ALTERNATE_OBJECT_DIRECTORIES="$alt" g rev-list --objects --missing=allow-any "$OLD" ||
        :
    fi; } | GIT_ALTERNATE_OBJECT_DIRECTORIES="$alt" g pack-objects --stdout -q --missing=allow-any |
    g index-pack --stdin > /dev/null || exit 1
  rm -rf "$GD.prev" && g read-tree "$tree" || exit 1
else g read-tree --empty || exit 1; fi
if [ -n "$BASE" ]; then
  g ls-files -z -c -i --exclude-from="$GD/info/exclude" -- . JUNK > "$GD/tracked-ignored" || exit 1
fi
""".replace("JUNK", JUNK)
# Brings the harness index up to date with the workspace:
# 1. every indexed file whose ctime (nanoseconds, and no tool sets it back) is newer than the time
#    in `ref` (the previous snapshot's start, less a margin) leaves the index, so it is hashed
#    again (the time is written by a builtin, not by `touch`: one process less per snapshot):
#    git's own stat check compares whole seconds only, and an mtime can be set back;
# 2. tracked entries, by git's stat check (racy entries compared by content);
# 3. files git does not know yet, under the base ignore rules; and the base files that those
#    rules ignore (`tracked-ignored`) wherever they are files again (git would not list them).
UPDATE = r"""export GIT_DIR="$GD" GIT_WORK_TREE="$PWD" GIT_INDEX_FILE="$GD/index"
P="$GD/paths" TI="$GD/tracked-ignored"
# whether the NUL-separated list $1 names a directory (git lists a nested repository as `dir/`):
# by builtins for a short list (no process), by grep for a long one
nested() {
  local u d IFS=
  mapfile -t -d '' -n 2001 u < "$1" && [ "${#u[@]}" -le 2000 ] || { grep -qz '/$' "$1"; return; }
  d="${u[*]/%*[!\/]/}"; [ -n "$d" ]
}
if [ -f "$GD/ref" ]; then
  read -r ref < "$GD/ref" && [[ $ref =~ ^[0-9]+\.[0-9]{6}$ ]] || exit 1
  { g ls-files -z | find -files0-from - -maxdepth 0 \( -type f -o -type l \) \
      -newerct "@$ref" -print0 > "$P"; } 2>/dev/null
  if [ -s "$P" ]; then g update-index --force-remove -z --stdin < "$P" || exit 1; fi
fi
now=${EPOCHREALTIME//[!0-9]/}; [ -n "$now" ] || now=$(date +%s%6N) || exit 1
now=$(( now - ${MARGIN_US:?} ))
printf '%d.%06d\n' $(( now / 1000000 )) $(( now % 1000000 )) > "$GD/ref" || exit 1
g add -u -- . JUNK || exit 1
g ls-files -z -o --exclude-from="$GD/info/exclude" -- . JUNK > "$P" || exit 1
if [ -s "$P" ] && nested "$P"; then
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
""".replace("JUNK", JUNK)
# The ignore files git reads in the workspace now (before the agent starts), with contents.
IGNORE_FILES = r"""{ GIT_DIR="$PWD/.git" g ls-files -z -co --exclude-standard \
    -- ':(glob)**/.gitignore' |
  while IFS= read -r -d '' f; do
    if [ -f "$f" ] && [ ! -L "$f" ]; then printf '%s\0' "$f"; base64 -w0 < "$f"; printf '\0'; fi
  done
  if [ -f .git/info/exclude ] && [ ! -L .git/info/exclude ]; then
    printf ':info/exclude\0'; base64 -w0 < .git/info/exclude; printf '\0'
  fi
} | base64 -w0 && echo && mktemp -d PREFIXXXXXXXXX &&
printf '%s|%s\n' "$(stat -c %z .)" "$(stat -f -c %T .)"
""".replace("PREFIX", GITDIR_PREFIX)
# Two trees compared in a bare git dir (so no worktree, no in-tree .gitattributes; `-c core.bare`
# alone would not do: git decides bareness from the config file): numstat (-z) and patch from one
# diff, as one base64 line, then an empty line (the host splits them at the NUL that ends the
# numstat: core/numstat.py). A binary file counts no lines (`-`; --text would not change
# that for numstat). A patch that is not valid UTF-8 (content or names) is made again with every
# file as a binary patch (the attributes file $BIN says `* -diff`) and odd names quoted, after a
# numstat of its own (without $BIN: the same as the first): exact, and ASCII but for symlink
# targets, which git always diffs as text. The patch file is emptied by a builtin, not removed
# (no process; a large patch does not sit in the sandbox's /tmp, whose tmpfs counts against its
# memory, until the next diff), and the fingerprint after it covers it.
_DIFF_BODY = r"""g -c core.bare=true DIFF --binary --numstat -z -p "$OLD" "$NEW" > "$T" || exit 1
if ! iconv -f UTF-8 -t UTF-8 < "$T" > /dev/null 2>&1; then
  { g -c core.bare=true DIFF --numstat -z "$OLD" "$NEW" && printf '\0' &&
    g -c core.bare=true -c core.quotePath=true -c core.attributesFile="$BIN" \
      DIFF --binary "$OLD" "$NEW"; } > "$T" || exit 1
fi
base64 -w0 < "$T" && echo && echo && : > "$T" || exit 1
""".replace("DIFF", _DIFF)
# Every snapshot notes when it started ($st, printed on its END line: the host derives $REF from
# it). If the host says the workspace was $OLD at $REF (the last snapshot's start, less the racy
# margin) and nothing in it but .git has a ctime after $REF (any write, chmod, link, rename or
# removal sets the ctime of the file or of its directory to now, and no tool can set it back),
# it is still $OLD: the snapshot says SAME (the git dir is untouched, its fingerprint stands)
# without running git. find failing (an unreadable directory) takes the full way.
# The find is bounded (0.3 s): a workspace with a large ignored tree (a cached .venv,
# node_modules) takes git's way, which skips ignored trees, and the END line says SLOW so the
# host stops asking.
UNCHANGED = r"""st=$EPOCHREALTIME slow=
if [ -n "$REF" ]; then
  ch=$(command -p timeout MAXF find . -path ./.git -prune -o -newerct "@$REF" -print -quit \
       2>/dev/null); fr=$?
  if [ "$fr" = 0 ] && [ -z "$ch" ]; then printf '%s\n\n\nEND %s\nSAME\n' "$OLD" "$st"; exit 0; fi
  [ "$fr" = 124 ] && slow=" SLOW"
fi
""".replace("MAXF", "0.3")
# ... and right after a snapshot, from $OLD to the new tree, in the harness git dir. The objects
# the snapshot wrote are copied into the workspace's store too, by unpack-objects (each written to
# a temporary file and renamed, as git writes objects, so a full disk or a killed exec leaves no
# half object there; an object already there is left alone): when the agent removes the harness
# git dir, the rebuild imports the last tree from there (verified by index-pack, as everything it
# imports), so the next step still diffs from it. Only the objects the new tree has and $OLD has
# not go (what this step wrote; the first snapshot: the loose ones, which the base's import did
# not pack): all of the git dir's loose objects each time made a step's cost grow with the
# attempt's length (300 of them: 37 ms a step). Not for the last snapshot ($LAST), which removes
# the git dir. A rebuild keeps $GD.prev when there is no store to move there (an earlier rebuild
# was cut short after moving it).
SNAPSHOT_DIFF = r"""tree=$(g write-tree --missing-ok) || exit 1
echo "$tree"
if [ -n "$OLD" ] && [ "$OLD" != "$tree" ]; then
  ( export NEW=$tree T="$GD/patch" BIN="$GD/binary"; unset GIT_WORK_TREE GIT_INDEX_FILE
""" + _DIFF_BODY + r"""  ) || { rm -f "$GD/patch"; exit 1; }
else echo; echo; fi
if [ -z "$LAST" ] && [ "$OLD" != "$tree" ] && [ -d .git/objects ] && [ ! -L .git ] &&
   [ ! -L .git/objects ]; then
  if [ -n "$OLD" ]; then
    printf '%s\n^%s\n' "$tree" "$OLD" | g pack-objects --revs --stdout -q --window=0 2>/dev/null
  else ( cd "$GD/objects" && for f in ??/*; do [ -f "$f" ] && printf '%s\n' "${f/\//}"; done ) |
    g pack-objects --stdout -q --window=0 2>/dev/null; fi |
    GIT_OBJECT_DIRECTORY="$PWD/.git/objects" g unpack-objects -q 2>/dev/null
fi
echo "END $st$slow" && fp
"""


# Applies a recorded patch to the pre-agent copy byte for byte: git apply converts content per
# the workspace's .gitattributes (eol=crlf, filters) and honours its config, so it runs against a
# throwaway git dir whose info/attributes turns every conversion off.
APPLY_SCRIPT = r"""D=$(mktemp -d /tmp/.agentbench-apply.XXXXXXXX) || exit 1
trap 'rm -rf "$D"' EXIT
mkdir "$D/refs" "$D/info" && printf 'ref: refs/heads/agentbench\n' > "$D/HEAD" &&
printf '%s' "$ATTRS" | base64 -d > "$D/info/attributes" || exit 1
GIT_DIR="$D" GIT_WORK_TREE="$PWD" g apply --binary --whitespace=nowarn "$PATCH"
"""


# A command's own snapshot after it, from the tree the snapshot before it took (sandbox port
# EpilogueRunning): AGENTBENCH_CHAIN is the time the command started, then that snapshot's first
# line (its tree) and the lines after its third (END and its start, and the git dir's fingerprint,
# or SAME: unchanged, and the fingerprint the host gave stands). The workspace was that tree when
# the command started (nothing runs between the two: the wrapper reaped the snapshot's leftovers),
# so the shortcut's $REF is that time less the racy margin, unless the snapshot was SLOW or the
# host turned the shortcut off.
CHAIN = r"""c=$AGENTBENCH_CHAIN; unset AGENTBENCH_CHAIN
if [ -n "$c" ]; then
  a=${c%%$'\n'*}; c=${c#*$'\n'}
  OLD=${c%%$'\n'*}; c=${c#*$'\n'}; e=${c%%$'\n'*}; f=${c#*$'\n'}; REF=
  [ "$f" = SAME ] || EXPECT=$f
  if [ -n "CHAINREF" ] && [[ $e =~ ^END\ [0-9]+[.,][0-9]{6}$ ]] &&
     [[ $a =~ ^([0-9]+)[.,]([0-9]{6})$ ]]; then
    m=$(( 10#${BASH_REMATCH[1]}${BASH_REMATCH[2]} - ${MARGIN_US:?} ))
    printf -v REF '%d.%06d' $(( m / 1000000 )) $(( m % 1000000 ))
  fi
fi
"""
# A command's own snapshot after it defers, the git dir untouched (its fingerprint stands), when a
# file changed since the last snapshot is large (found within 0.3 s): hashing it is work for a
# snapshot in an exec with a bound of its own (the host takes one at once), not for the
# command's, which the host may cut short (a disk limit, a deadline), leaving a rebuild.
AFTER_BIG_KIB = 8192
AFTER_BIG = r"""read -r r0 < "$GD/ref" 2>/dev/null || r0=
if [[ $r0 =~ ^[0-9]+\.[0-9]{6}$ ]] && [ -n "$(command -p timeout 0.3 find . -path ./.git -prune \
     -o -type f -size +BIGk -newerct "@$r0" -print -quit 2>/dev/null)" ]; then
  printf 'DEFER\n%s\n' "$EXPECT"; exit 0
fi
""".replace("BIG", str(AFTER_BIG_KIB))
# The end of a command's own snapshot after it: its output when it fits what the wrapper hands
# back (port.EpilogueRunning), else DEFER and the git dir's fingerprint (the index was updated:
# the host takes the fingerprint, and the step's snapshot is taken later without a rebuild).
AFTER_MAX_OUTPUT = 192_000  # characters, under the Docker wrapper's 256 KiB
AFTER_TAIL = "o=$(\n" + SNAPSHOT_DIFF + r""") || exit 1
if [ "${#o}" -le MAXO ]; then printf '%s\n' "$o"; else printf 'DEFER\n%s\n' "$(fp)"; fi
""".replace("MAXO", str(AFTER_MAX_OUTPUT))
# The part of a command's own snapshot after it that runs git, in a bash of its own bounded by
# AFTER_MAX_SEC: that snapshot runs inline in the command's exec (git_scripts' callers: gitops
# wrapped_scripts), whose only bound is the exec's deadline, which the host would read as the
# command's timeout. The variables and functions it needs go along; "unchanged" stays inline.
AFTER_MAX_SEC = 20


def bounded(text: str) -> str:
    """`text` run by `timeout AFTER_MAX_SEC bash -c`, after PRELUDE, FP and UNCHANGED."""
    return ("export GD BASE OLD REF LAST ATTRS MARGIN_US EXPECT st slow\nexport -f g fp\n"
            f"command -p timeout -k 1 {AFTER_MAX_SEC} bash -c "
            f"{shlex.quote('set -o pipefail' + chr(10) + text)}\nexit $?\n")
