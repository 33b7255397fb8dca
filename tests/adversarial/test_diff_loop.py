"""Issue 8 item 0: the recorded change equals the workspace change, proven by a loop.

Right after checkout, and then right after every snapshot (the harness's index write), an
"agent" makes random fast edits through `run` (a batch of shell edits per call) and through the
tool API: same-size byte edits in place (also with the mtime set back to what it was), rewrites,
renames, deletions, chmod +x/-x, new files, files in new directories, symlinks (and same-length
retargets), file <-> directory swaps, hard links, binary and non-UTF-8 content, CRLF, odd names
(quotes, tabs, newlines, spaces, non-ASCII, leading dash), a .gitignore or info/exclude that would
hide its files, files the repository ignores, assume-unchanged bits and stat config written into
its own .git, commits, and the harness's own snapshot dir removed or tampered with.

After every tool call the step patches the RecordingToolbox wrote are applied to a shadow copy of
the pre-agent workspace, and the shadow is compared file by file (bytes + executable bit, symlink
targets) with the workspace on the host as it was after the last step whose snapshot was taken
(a step's snapshot may wait for the next call: folded into the next command's exec, or taken
before the next host-side edit; some rounds run two commands in a row for that). At the end the
final diff is applied to a fresh pre-agent copy the way scoring does, compared the same way, and
its changed paths must be exactly the paths that differ. Zero differences are allowed.
"""

from __future__ import annotations

import os
import random
import shlex
import subprocess
import time
from collections import Counter
from pathlib import Path

from pytest_agentbench.sandbox.port import SandboxFactory
from tests.support.diff_bench import (
    Bench,
    State,
    changed_paths,
    differences,
    git,
    tree_state,
)

ROUNDS = int(os.environ.get("AGENTBENCH_DIFF_LOOP_ROUNDS", "40"))  # a knob for long soaks
SHELL_EDITS_PER_ROUND = 30
DIRS = ["", "src", "src/pkg", "tests", "docs", "new/deep/dir", "we ird", "ünï"]
NAMES = [
    "a.py", "b.txt", "c.md", "sp ace.txt", 'q"uote.py', "tab\tname.txt", "nl\nname.txt",
    "ünï.txt", "-dash.txt", "back\\slash.txt", "star*.txt", "brack[1].txt", "e", "conftest.py",
]
TOOL_NAMES = ["a.py", "b.txt", "c.md", "sp ace.txt", 'q"uote.py', "ünï.txt", "e"]
BASE_FILES: dict[str, bytes | str] = {
    ".gitignore": "build/\n*.log\n",
    "keep.log": "tracked although ignored\n",
    "build/keep.txt": "tracked in an ignored dir\n",
    "src/units.py": "MB = 1000 ** 2\nKB = 1000\n",
    "src/config.py": "def parse(s):\n    return s.lower()\n",
    "src/pkg/__init__.py": "",
    "tests/test_units.py": "from src.units import MB\n\ndef test_mb():\n    assert MB\n",
    "docs/readme.md": "# docs\n" + "line\n" * 40,
    "bin.dat": bytes(range(256)) * 4,
    "latin.txt": b"caf\xe9 na\xefve\n",
    "crlf.txt": b"one\r\ntwo\r\n",
    "link": b"",  # replaced by a symlink below
}
BASE_TRACKED = set(BASE_FILES)
ATTRIBUTES_OFF = b"* -text -crlf -eol -filter -ident -working-tree-encoding\n"


def repo_ignores(rel: str) -> bool:
    """The base .gitignore (`build/`: a directory at any depth, `*.log`: anything at any depth),
    tracked files aside: never part of a diff."""
    if rel in BASE_TRACKED:
        return False
    parts = rel.split("/")
    return "build" in parts[:-1] or any(p.endswith(".log") for p in parts)


def content(rng: random.Random) -> bytes:
    kind = rng.random()
    if kind < 0.08:
        return b""
    if kind < 0.16:
        return bytes(rng.randrange(256) for _ in range(rng.randint(1, 300)))  # binary, NUL
    if kind < 0.22:
        return "".join(rng.choice("éàü\xe9x") for _ in range(20)).encode("latin-1", "replace")
    if kind < 0.28:
        return b"crlf\r\nline\r\n" * rng.randint(1, 3)
    lines = [f"v{rng.randrange(10**6)} = {rng.random():.6f}" for _ in range(rng.randint(1, 12))]
    return ("\n".join(lines) + ("\n" if rng.random() < 0.8 else "")).encode()


def printf_bytes(data: bytes) -> str:
    """A shell word that printf turns back into exactly `data` (octal escapes)."""
    return "'" + "".join(f"\\{b:03o}" for b in data) + "'"


class Agent:
    """Random edits, counted by kind; targets come from the workspace as it is now."""

    def __init__(self, bench: Bench, rng: random.Random) -> None:
        self.bench, self.rng = bench, rng
        self.counts: Counter[str] = Counter()

    def state(self) -> State:
        return tree_state(self.bench.repo)

    def pick_path(self) -> str:
        d, n = self.rng.choice(DIRS), self.rng.choice(NAMES)
        if self.rng.random() < 0.7:  # mostly a name that is not taken yet
            stem, dot, ext = n.partition(".")
            n = f"{stem}{self.rng.randrange(10**4)}{dot}{ext}"
        return f"{d}/{n}" if d else n

    def files(self, state: State) -> list[str]:
        return sorted(r for r, e in state.items() if e[0] == "file" and not repo_ignores(r))

    def shell_batch(self) -> tuple[str, list[str]]:
        state = self.state()
        # the regular files the batch can work on, kept up to date as its edits are planned
        sizes = {r: len(state[r][1]) for r in self.files(state)}
        lines, ops = ["set +e"], []
        for i in range(SHELL_EDITS_PER_ROUND):
            op, cmd = self.shell_edit(state, sizes)
            ops.append(op)
            lines.append(f"{{ {cmd}\n}} >/dev/null 2>&1 && echo @ok{i}")
        return "\n".join(lines) + "\ntrue\n", ops

    def shell_edit(self, state: State, sizes: dict[str, int]) -> tuple[str, str]:
        rng, q = self.rng, shlex.quote
        if not sizes:
            sizes["src/units.py"] = 1
            return "new_file", "mkdir -p src && printf x > src/units.py"
        f = rng.choice(sorted(sizes))
        size = sizes[f]
        plain = f"[ -f {q(f)} ] && [ ! -L {q(f)} ] && "  # never write through a symlink
        new = self.pick_path()
        while new in sizes or any(p.startswith(new + "/") for p in sizes):
            new = self.pick_path()
        parent = q(str(Path(new).parent))
        fresh = f"mkdir -p {parent} && [ ! -e {q(new)} ] && [ ! -L {q(new)} ] && "
        data = content(rng)
        roll = rng.random()
        if roll < 0.22 and size:  # same size, in place, same second as the last index write
            at = rng.randrange(size)
            return "same_size", (f"{plain}printf {printf_bytes(bytes([rng.randrange(256)]))} | "
                                 f"dd of={q(f)} bs=1 seek={at} conv=notrunc status=none")
        if roll < 0.34 and size:  # same size and the old mtime put back
            at = rng.randrange(size)
            return "same_size_mtime_kept", (
                f"{plain}t=$(stat -c %y {q(f)}) && "
                f"printf {printf_bytes(bytes([rng.randrange(256)]))} | "
                f"dd of={q(f)} bs=1 seek={at} conv=notrunc status=none && touch -d \"$t\" {q(f)}")
        if roll < 0.42:
            sizes[f] = len(data)
            return "rewrite", f"{plain}printf {printf_bytes(data)} > {q(f)}"
        if roll < 0.48:
            sizes[f] += len(data[:40] or b"x")
            return "append", f"{plain}printf {printf_bytes(data[:40] or b'x')} >> {q(f)}"
        if roll < 0.55:
            sizes[new] = sizes.pop(f)
            return "rename", f"{fresh}mv {q(f)} {q(new)}"
        if roll < 0.61:
            sizes.pop(f)
            return "delete", f"rm {q(f)}"
        if roll < 0.67:
            return "chmod", f"{plain}chmod {rng.choice(['+x', '-x', 'u+x', 'u-x'])} {q(f)}"
        if roll < 0.75:
            sizes[new] = len(data)
            return "new_file", f"{fresh}printf {printf_bytes(data)} > {q(new)}"
        if roll < 0.80:
            target = rng.choice([f, "nowhere", "/nonexistent/abs", "src", "a" * 7])
            return "symlink", f"{fresh}ln -s {q(target)} {q(new)}"
        if roll < 0.83:
            links = [r for r, e in state.items() if e[0] == "link"]
            link = rng.choice(links) if links else "link"
            same = "".join(rng.choice("xyz") for _ in state.get(link, ("", "abc"))[1])
            return "symlink_retarget", f"[ -L {q(link)} ] && ln -sfn {q(same)} {q(link)}"
        if roll < 0.86:
            sizes.pop(f)
            sizes[f + "/inner.txt"] = len(data)
            return "file_to_dir", (f"{plain}rm {q(f)} && mkdir {q(f)} && "
                                   f"printf {printf_bytes(data)} > {q(f + '/inner.txt')}")
        if roll < 0.88:
            dirs = sorted({str(Path(r).parent) for r in sizes if "/" in r} - {"build"})
            d = rng.choice(dirs) if dirs else "docs"
            for gone in [r for r in sizes if r.startswith(d + "/")]:
                sizes.pop(gone)
            sizes[d] = len(data)
            return "dir_to_file", (f"[ -d {q(d)} ] && [ ! -L {q(d)} ] && rm -r {q(d)} && "
                                   f"printf {printf_bytes(data)} > {q(d)}")
        if roll < 0.90:
            sizes[new] = size
            return "hard_link", f"{plain}{fresh}ln {q(f)} {q(new)}"
        if roll < 0.92:  # ignore rules the agent writes hide nothing
            d = rng.choice(["", "src", "tests", "new/deep/dir"])
            rules = rng.choice(["*\n", "*.py\n", "conftest.py\n.gitignore\n", "!*\n"])
            where = rng.choice([f"{d}/.gitignore" if d else ".gitignore", ".git/info/exclude"])
            hidden = (d + "/" if d else "") + f"hidden{rng.randrange(10**4)}.py"
            sizes[hidden] = 3
            return "ignore_rules", (f"mkdir -p {q(d or '.')} .git/info && [ ! -L {q(where)} ] && "
                                    f"printf %s {q(rules)} >> {q(where)} && [ ! -L {q(hidden)} ]"
                                    f" && printf new > {q(hidden)}")
        if roll < 0.94:  # the repository's own ignore rules: never part of the diff
            return "ignored_file", ("[ ! -L build ] && mkdir -p build && "
                                    f"printf x{rng.randrange(99)} > build/o.txt && "
                                    "[ ! -L debug.log ] && printf y >> debug.log")
        if roll < 0.985:  # the agent's own .git: flags and config that fool a stat cache
            return "git_tamper", rng.choice([
                f"git update-index --assume-unchanged -- {q(f)}",
                f"git update-index --skip-worktree -- {q(f)}",
                "git config core.checkStat minimal", "git config core.trustctime false",
                "git config core.ignoreStat true", "git config core.fileMode false",
                "git config core.symlinks false", "git config core.ignoreCase true",
                "git config core.untrackedCache true && git status -uall",
                "git config core.splitIndex true && git add -A",
                "git add -A",
                "git -c user.name=a -c user.email=b commit -qam wip",
                "[ ! -L .gitattributes ] && printf '* text eol=crlf\\n*.txt filter=x\\n'"
                " >> .gitattributes",
            ])
        # the harness's snapshot dir in /tmp: removed or tampered with
        snapshots = getattr(self.bench.toolbox, "snapshots", None)
        gitdir = getattr(snapshots, "gitdir", None) or "/nonexistent"
        return "harness_tamper", rng.choice([
            f"rm -rf {q(gitdir)}",
            f"printf x >> {q(gitdir + '/info/exclude')}",
            f"GIT_DIR={q(gitdir)} GIT_INDEX_FILE={q(gitdir + '/index')} "
            "GIT_OBJECT_DIRECTORY=$PWD/.git/objects "
            f"git update-index --assume-unchanged -- {q(f)}",
            f"touch -d '+1 hour' {q(gitdir + '/ref')} {q(gitdir + '/index')}",
        ])

    def tool_edit(self) -> None:
        state = self.state()
        files = self.files(state)
        rng = self.rng
        roll = rng.random()
        f = rng.choice(files) if files else "src/units.py"
        if roll < 0.4 and f in state:  # same size through the tool API (in place)
            data = bytearray(state[f][1]) or bytearray(b"x")
            data[rng.randrange(len(data))] = rng.randrange(32, 127)
            op, args = "write_file_same_size", {"path": f, "content": bytes(data).decode(
                "utf-8", "surrogateescape")}
        elif roll < 0.65:
            d = rng.choice(DIRS)
            name = rng.choice(TOOL_NAMES)
            op, args = "write_file_new", {"path": f"{d}/{name}" if d else name,
                                          "content": content(rng).decode("utf-8",
                                                                         "surrogateescape")}
        elif roll < 0.8:
            op, args = "remove_file", {"path": f}
        else:
            op, args = "apply_patch", {"unified_diff": self.patch_for(state, files)}
        tool = {"write_file_same_size": "write_file", "write_file_new": "write_file"}.get(op, op)
        result = self.bench.call(tool, **args)
        self.counts[f"tool:{op}" + ("" if result.ok else ":refused")] += 1

    def patch_for(self, state: State, files: list[str]) -> str:
        texts = [f for f in files if "\n" not in f and "\t" not in f and '"' not in f
                 and "\\" not in f and _utf8_lines(state[f][1])]
        f = self.rng.choice(texts) if texts else "src/units.py"
        lines = state[f][1].decode().splitlines(keepends=True) if f in state else []
        if not lines or not lines[0].endswith("\n"):
            return f"--- /dev/null\n+++ b/{f}.new\n@@ -0,0 +1 @@\n+new file\n"
        i = self.rng.randrange(len(lines))
        old = lines[i] if lines[i].endswith("\n") else lines[i] + "\n"
        if not lines[i].endswith("\n"):
            return f"--- /dev/null\n+++ b/{f}.new\n@@ -0,0 +1 @@\n+new file\n"
        new = old[:-1][::-1] + "\n"  # same size
        return f"--- a/{f}\n+++ b/{f}\n@@ -{i + 1} +{i + 1} @@\n-{old}+{new}"


def _utf8_lines(data: bytes) -> bool:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return "\r" not in text and "\x00" not in text


def apply_step(shadow: Path, patch: Path) -> None:
    """A step patch applied on the host to the shadow (our own copy), without conversions."""
    done = subprocess.run(
        ["git", "apply", "--binary", "--whitespace=nowarn", str(patch)], cwd=shadow,
        capture_output=True,
        env={"PATH": "/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
             "GIT_DIR": str(shadow.parent / "shadow.git"), "GIT_WORK_TREE": str(shadow)})
    assert done.returncode == 0, f"{patch.name} does not apply: {done.stderr.decode()[-500:]}"


def test_recorded_diff_equals_the_workspace_over_1000_fast_edits(
    sandbox_kind: tuple[str, SandboxFactory], tmp_path: Path  # noqa: F811 - the fixture
) -> None:
    kind, factory = sandbox_kind
    seed = {"local": 8101, "docker": 8102}[kind]
    rng = random.Random(seed)
    started = time.monotonic()

    def symlink_and_shadow(bench: Bench) -> None:
        # right after checkout: a symlink in the base, a shadow copy with a git dir of its own
        (bench.repo / "link").unlink()
        (bench.repo / "link").symlink_to("src/units.py")
        (bench.pristine / "link").unlink()
        (bench.pristine / "link").symlink_to("src/units.py")

    bench = Bench(kind, factory, tmp_path, BASE_FILES, before_toolbox=symlink_and_shadow)
    shadow = tmp_path / "shadow"
    subprocess.run(["cp", "-a", f"{bench.pristine}/.", str(shadow)], check=True)
    subprocess.run(["rm", "-rf", str(shadow / ".git")], check=True)
    git(tmp_path, "init", "-q", "--bare", "--template=", "shadow.git")
    (tmp_path / "shadow.git" / "info").mkdir(exist_ok=True)
    (tmp_path / "shadow.git" / "info" / "attributes").write_bytes(ATTRIBUTES_OFF)
    agent = Agent(bench, rng)
    checks = mismatches = 0

    def shell_round() -> None:
        command, ops = agent.shell_batch()
        done = bench.run(command).stdout
        for i, op in enumerate(ops):
            agent.counts[f"run:{op}" + ("" if f"@ok{i}\n" in done else ":no-op")] += 1
    states: dict[int, State] = {}
    applied = 0  # the step patches up to this step are in the shadow
    try:
        for _round in range(ROUNDS):
            calls = [shell_round, agent.tool_edit]
            if rng.random() < 0.5:  # two commands in a row: the first one's snapshot is folded
                calls.insert(0, shell_round)
            for call in calls:
                call()
                step = bench.toolbox.step
                states[step] = tree_state(bench.repo, repo_ignores)
                pending = getattr(bench.toolbox, "pending", None)
                settled = step if pending is None else pending - 1
                for done_step in range(applied + 1, settled + 1):
                    patch = bench.paths.root / "diffs" / f"step_{done_step:04d}.patch"
                    if patch.exists():
                        apply_step(shadow, patch)
                applied = max(applied, settled)
                if settled == 0:
                    continue
                found = differences(tree_state(shadow, repo_ignores), states[settled])
                checks += 1
                mismatches += bool(found)
                notes = [e for e in bench.events.emitted if e.get("type") == "note"]
                assert not found, (f"step {settled} ({kind}, seed {seed}):\n"
                                   + "\n".join(found[:20]) + f"\nnotes: {notes[-3:]}")
        notes = [e for e in bench.events.emitted if e.get("type") == "note"]
        failed = [e for e in notes if e.get("kind") == "snapshot_failed"]
        assert not failed, failed
        before = tree_state(bench.pristine, repo_ignores)
        after = tree_state(bench.repo, repo_ignores)
        scored = tree_state(bench.scored_copy(), repo_ignores)
        for done_step in range(applied + 1, bench.toolbox.step + 1):  # settled by final_diff
            patch = bench.paths.root / "diffs" / f"step_{done_step:04d}.patch"
            if patch.exists():
                apply_step(shadow, patch)
        last = differences(tree_state(shadow, repo_ignores), states[bench.toolbox.step])
        assert not last, "the last step's patch:\n" + "\n".join(last[:20])
        final = differences(scored, after)
        assert not final, "final diff applied to the pre-agent copy:\n" + "\n".join(final[:20])
        assert set(bench.toolbox.final_diff()[0]) == changed_paths(before, after)
    finally:
        bench.close()
    edits = sum(n for op, n in agent.counts.items() if not op.endswith((":no-op", ":refused")))
    rebuilt = sum(1 for e in bench.events.emitted if e.get("kind") == "snapshot_rebuilt")
    folded, deferred = bench.toolbox.folded, bench.toolbox.deferred
    print(f"\n{kind}: {edits} edits in {bench.toolbox.step} tool calls, {checks} comparisons, "
          f"{mismatches} differences, {rebuilt} snapshot rebuilds after tampering, "
          f"{folded} snapshots folded into the next command, {deferred} deferred, "
          f"{time.monotonic() - started:.1f}s; by kind: {dict(sorted(agent.counts.items()))}")
    assert edits >= 25 * ROUNDS
    assert folded >= ROUNDS // 2, "the folded snapshot path was hardly exercised"
