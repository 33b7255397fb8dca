"""Issue 20 item 1: the scored change is the workspace, whatever objects anyone plants.

git neither rewrites an object that exists nor checks a loose object it reads. When snapshots
wrote into the workspace's own `.git/objects`, an agent (or the code under test) that planted
content C' under the id of C, then wrote C, was scored on C' (a broken workspace PASSED, a fix
FAILED). Snapshots now keep an object store of their own. These tests plant objects the way an
agent or a test run would (through `run`, as the sandbox user) in the workspace's store and in
the harness's own, before and after edits, and compare what scoring would apply with the
workspace, file by file: zero differences.
"""

from __future__ import annotations

import base64
import hashlib
import random
import zlib
from pathlib import Path

from pytest_agentbench.sandbox.port import SandboxFactory
from tests.support.diff_bench import Bench, differences, tree_state

Kind = tuple[str, SandboxFactory]
BROKEN = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
FILES: dict[str, bytes | str] = {"calc.py": BROKEN, "pyproject.toml": "[project]\nname = 'x'\n"}


def blob_id(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def plant_command(store: str, object_id: str, holding: bytes) -> str:
    """Shell text that writes a loose object named `object_id` holding `holding` into every
    object store matching the glob `store` (replacing one that is there)."""
    data = base64.b64encode(zlib.compress(b"blob %d\0" % len(holding) + holding)).decode()
    rel = f"{object_id[:2]}/{object_id[2:]}"
    return (f"for s in {store}; do [ -d \"$s\" ] || continue; mkdir -p \"$s/{object_id[:2]}\" && "
            f"rm -f \"$s/{rel}\" && printf %s {data} | base64 -d > \"$s/{rel}\"; done; true")


WORKSPACE_STORE = ".git/objects"


def harness_store(bench: Bench) -> str:
    """This bench's own harness object store. (A glob over /tmp/.agentbench-git.* reached the
    git dirs of other tests running at the same time on the local kind, whose /tmp is the
    host's, and planted into them in the middle of their snapshots: no sandbox allows that.)"""
    return f"{bench.toolbox.snapshots.gitdir}/objects"


def scored_equals_workspace(bench: Bench) -> list[str]:
    return differences(tree_state(bench.scored_copy()), tree_state(bench.repo))


def test_an_object_planted_before_the_fix_is_not_what_is_scored(
    sandbox_kind: Kind, tmp_path: Path
) -> None:
    """The agent plants the broken content under the fix's id, then writes the fix: the fix is
    scored (before: the broken content was, and PASSED or FAILED the wrong way)."""
    bench = Bench(sandbox_kind[0], sandbox_kind[1], tmp_path, FILES)
    try:
        bench.run(plant_command(WORKSPACE_STORE, blob_id(FIXED.encode()), b"BROKEN = True\n"))
        bench.call("write_file", path="calc.py", content=FIXED)
        bench.run("true")
        assert scored_equals_workspace(bench) == []
        assert (bench.scored_copy("again") / "calc.py").read_text() == FIXED
    finally:
        bench.close()


def test_code_under_test_that_plants_after_the_fix_cannot_change_the_score(
    sandbox_kind: Kind, tmp_path: Path
) -> None:
    """The agent fixes, then runs the 'tests', which plant the broken blob under the fix's id in
    both stores (the workspace's and the harness's) and an odd pyproject under the id of the
    agent's: the scored copy still holds the fix and the agent's pyproject."""
    bench = Bench(sandbox_kind[0], sandbox_kind[1], tmp_path, FILES)
    pyproject = "[project]\nname = 'x'\nversion = '1'\n"
    try:
        bench.call("write_file", path="calc.py", content=FIXED)
        bench.call("write_file", path="pyproject.toml", content=pyproject)
        for store in (WORKSPACE_STORE, harness_store(bench)):
            bench.run(plant_command(store, blob_id(FIXED.encode()), BROKEN.encode()))
            bench.run(plant_command(
                store, blob_id(pyproject.encode()),
                b"[tool.pytest.ini_options]\naddopts = '-p no_such_plugin'\n"))
        bench.run("true")
        assert scored_equals_workspace(bench) == []
        assert (bench.repo / "calc.py").read_text() == FIXED
    finally:
        bench.close()


def test_a_loop_of_planted_objects_shows_no_difference(sandbox_kind: Kind, tmp_path: Path) -> None:
    """Random edits and random plants (into either store, under the id of content the workspace
    held, holds or will hold, before and after each edit): the final diff applied to the
    pre-agent copy equals the workspace every time."""
    rng = random.Random(20)
    rounds = 12 if sandbox_kind[0] == "docker" else 30
    bench = Bench(sandbox_kind[0], sandbox_kind[1], tmp_path, FILES)
    contents = [BROKEN, FIXED, "x = 1\n", "x = 2\n", "y = 'z' * 3\n", ""]
    try:
        for _ in range(rounds):
            name = rng.choice(["calc.py", "new.py", "pyproject.toml", "sub/deep.py"])
            content = rng.choice(contents)
            victim = rng.choice(contents).encode()
            store = rng.choice([WORKSPACE_STORE, harness_store(bench)])
            plant = plant_command(store, blob_id(victim), rng.choice(contents).encode() + b"#p\n")
            if rng.random() < 0.5:
                bench.run(plant)
            if rng.random() < 0.5:
                bench.call("write_file", path=name, content=content)
            else:
                bench.run(f"mkdir -p sub && printf %s {base64.b64encode(content.encode()).decode()}"
                          f" | base64 -d > {name} && {plant}")
        bench.run("true")
        assert scored_equals_workspace(bench) == []
    finally:
        bench.close()
