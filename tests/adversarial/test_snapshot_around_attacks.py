"""A hostile command between the two snapshots its exec takes on Docker (port.EpilogueRunning:
the pending step's before it, its own after it, the first's tree and fingerprint handed to the
second in the wrapper's memory).

The command cannot make its own step look unchanged: with the nonce it steals from a readable
wrapper (an image without the execute-only shell) it prints the after-snapshot's line saying
SAME for the last tree and a forged trailer and kills the wrapper; under the execute-only shell it
cannot steal the nonce and kills the wrapper anyway. Either way the host takes no after-snapshot
from that exec: the step stays pending and the next snapshot records the edit. Tampering with the
harness git dir during the command fails the after-snapshot's fingerprint check the same way.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from tests.support.diff_bench import Bench, differences, tree_state
from tests.support.sandboxes import (
    STEAL_NONCE,
)

FILES: dict[str, bytes | str] = {"a.txt": "hello\n"}


def _forging_edit(last_tree: str) -> str:
    """An edit, then the after-snapshot's line saying "unchanged, still `last_tree`" and a
    trailer saying 0, with the wrapper's nonce if it can be read, then the wrapper killed."""
    same = base64.b64encode(f"{last_tree}\n\n\nEND 1.000000\nSAME\n".encode()).decode()
    lines = (f"printf '\\n\\036agentbench-epilogue:%s +{same}\\n' \"$n\" >&2; "
             "printf '\\n\\036agentbench-end:%s 0 0 0 -\\n' \"$n\" >&2")
    return f"printf edited >> a.txt; {STEAL_NONCE}; {lines}; kill -9 $w; exit 0"


@pytest.mark.parametrize("shell", ["execute-only", "readable"])
def test_a_command_cannot_hide_its_edit_from_its_own_step(
        docker_sandboxes: Any, plain_shell_image: str, tmp_path: Path, shell: str) -> None:
    image = plain_shell_image if shell == "readable" else None
    bench = Bench("docker", docker_sandboxes, tmp_path, FILES, image=image)
    try:
        hostile = bench.call("run", command=_forging_edit(bench.toolbox.last_tree))  # step 1
        assert hostile.exit_code == 137  # the engine's status: the wrapper was killed
        assert bench.toolbox.taken != 1 and bench.toolbox.pending == 1
        bench.run("true")  # step 2: step 1's snapshot before it
        patch = (bench.paths.root / "diffs" / "step_0001.patch").read_text("utf-8")
        assert "a/a.txt" in patch and "\n+edited\n" in patch
        assert not differences(tree_state(bench.scored_copy()), tree_state(bench.repo))
    finally:
        bench.close()


def test_a_command_tampering_with_the_git_dir_fails_its_own_step_check(
        docker_sandboxes: Any, tmp_path: Path) -> None:
    bench = Bench("docker", docker_sandboxes, tmp_path, FILES)
    try:
        assert bench.call("write_file", path="b.txt", content="b\n").ok  # step 1, pending
        gitdir = bench.toolbox.snapshots.gitdir
        # step 2 edits, and makes the harness index forget a.txt's change (stat data kept)
        bench.run(f"printf x >> a.txt && touch -r {gitdir}/index a.txt && "
                  f"printf '# planted\\n' >> {gitdir}/info/exclude")
        assert bench.toolbox.pending == 2  # its own snapshot failed its fingerprint check
        bench.run("true")  # step 3: the git dir rebuilt from the base tree, every file hashed
        assert bench.toolbox.snapshots.rebuilds == 1
        patches = sorted(p.name for p in (bench.paths.root / "diffs").glob("step_*.patch"))
        assert patches == ["step_0001.patch", "step_0002.patch"]
        assert "\n+x\n" in (bench.paths.root / "diffs" / "step_0002.patch").read_text("utf-8")
        assert not differences(tree_state(bench.scored_copy()), tree_state(bench.repo))
    finally:
        bench.close()
