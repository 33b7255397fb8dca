"""Issue 10 item 5: a snapshot runs no git when nothing changed ($REF, git_scripts.UNCHANGED).

A snapshot may answer "the workspace is still the last tree" when nothing in it has a ctime
after the last snapshot's start less the racy margin. Each edit below comes right after such a
snapshot, when the workspace has been quiet for longer than the margin (so the shortcut is
really taken before it), and the next snapshot must record it, whatever the edit kept (size,
mtime, inode) and whoever made it (a command in the sandbox, or the host through a tool).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from pytest_agentbench.core.git_scripts import RACY_MARGIN_SEC
from pytest_agentbench.sandbox.port import SandboxFactory
from tests.support.diff_bench import Bench, differences, tree_state

Kind = tuple[str, SandboxFactory]
FILES: dict[str, bytes | str] = {"a.txt": "hello\n", "b.txt": "bye\n", "d/keep.txt": "k\n"}
EDITS = {  # command (or a write_file), and what its step's patch must say
    "same_size_mtime_kept": ("t=$(stat -c %y a.txt) && printf j | dd of=a.txt bs=1 seek=0 "
                             "conv=notrunc 2>/dev/null && touch -d \"$t\" a.txt", "+jello"),
    "chmod": ("chmod +x a.txt", "new mode 100755"),
    "delete": ("rm b.txt", "deleted file mode"),
    "rename": ("mv b.txt d/c.txt", "d/c.txt"),
    "new_file": ("printf n > d/new.txt", "d/new.txt"),
    "symlink_retarget": ("ln -sfn xyz link", "+xyz"),
    "hard_link": ("ln a.txt d/hard.txt", "d/hard.txt"),
    "host_write": (None, "+yellow"),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_edit_right_after_an_unchanged_snapshot_is_recorded(
    sandbox_kind: Kind, tmp_path: Path, edit: str
) -> None:
    def link(b: Bench) -> None:
        for root in (b.repo, b.pristine):
            (root / "link").symlink_to("abc")

    bench = Bench(sandbox_kind[0], sandbox_kind[1], tmp_path, FILES, before_toolbox=link)
    command, expected = EDITS[edit]
    snapshots = bench.toolbox.snapshots
    try:
        time.sleep(RACY_MARGIN_SEC + 0.3)  # then quiet: nothing changes for longer than the margin
        bench.run("true")
        bench.run("true")
        quiet = snapshots.unchanged
        bench.run("true")  # quiet since the last snapshot's $REF, so its snapshot runs no git
        if command is None:  # the pending snapshot (if any: no git) first, then the host writes
            result = bench.call("write_file", path="a.txt", content="yellow\n")
            assert result.ok, result.to_observation()
        else:
            bench.run(command)  # (the pending snapshot, if any, before it: no git)
        # the snapshot right before the edit took the shortcut: the case under test
        assert snapshots.unchanged > quiet
        edit_step = bench.toolbox.step
        after = tree_state(bench.repo)
        edited = snapshots.unchanged
        bench.run("true")  # the edit's snapshot (its own exec's, or folded): it must see the edit
        assert snapshots.unchanged <= edited + 1  # the run's own snapshot may be unchanged
        patch = bench.paths.root / "diffs" / f"step_{edit_step:04d}.patch"
        assert patch.exists(), f"{edit}: the edit's step recorded no diff"
        assert expected in patch.read_text("utf-8")
        scored = tree_state(bench.scored_copy())
        assert not differences(scored, after)
    finally:
        bench.close()


def test_a_wall_clock_step_or_a_slow_check_turns_the_shortcut_off(
    sandbox_kind: Kind, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red-team findings. $REF and ctimes are wall-clock times: after the clock steps back, an
    edit could be dated before $REF and a snapshot would say "unchanged" (the host now refuses
    $REF when the wall clock moved against the monotonic one). And the shortcut's find walks
    ignored trees that git skips: bounded, and once too slow, never asked again."""
    import pytest_agentbench.core.git_scripts as sh
    import pytest_agentbench.core.gitops as gitops

    bench = Bench(sandbox_kind[0], sandbox_kind[1], tmp_path, FILES)
    snapshots = bench.toolbox.snapshots
    try:
        time.sleep(RACY_MARGIN_SEC + 0.3)
        for _ in range(3):
            bench.run("true")
        unchanged = snapshots.unchanged
        assert unchanged >= 1  # the shortcut works here ...
        offset = gitops._clock_offset()
        monkeypatch.setattr(gitops, "_clock_offset", lambda: offset - 5.0)  # stepped back 5 s
        bench.run("true")
        # ... and is not taken right after the step (git runs and takes a new $REF in the new
        # clock, which later snapshots may use again)
        assert snapshots.unchanged == unchanged
        monkeypatch.setattr(gitops, "_clock_offset", lambda: offset)
        slow = sh.UNCHANGED.replace("timeout 0.3", "timeout 0.000001")
        monkeypatch.setattr(sh, "UNCHANGED", slow)
        time.sleep(RACY_MARGIN_SEC + 0.3)
        unchanged = snapshots.unchanged
        for _ in range(3):
            bench.run("true")
        assert snapshots.shortcut_off and snapshots.unchanged == unchanged
        bench.run("printf x > a.txt")
        bench.run("true")
        assert not differences(tree_state(bench.scored_copy()), tree_state(bench.repo))
    finally:
        bench.close()
