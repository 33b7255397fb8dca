"""Issue 10 item 5: a step's snapshot folded into the next command's exec (core/snapshot_fold.py).

The command must not notice (same output, exit status, environment, $0), the step must keep its
own diff, a command cannot forge a snapshot block, and whatever cannot be folded (a large diff, a
short budget, an `env`, a tampered git dir) is snapshotted in an exec of its own before the
command runs, exactly once. Both sandboxes run the pending snapshot before the command and the
command's own after it (port.EpilogueRunning: Docker's wrapper, the local sandbox's
subprocesses): no step is left pending after a `run`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_agentbench.core.snapshot_fold import split_fold
from pytest_agentbench.sandbox.port import (
    PROLOGUE_MARK,
    PROLOGUE_MAX_BLOCK,
    ExecResult,
    SandboxError,
    SandboxFactory,
)
from tests.support.diff_bench import Bench

Kind = tuple[str, SandboxFactory]
FILES: dict[str, bytes | str] = {"src/units.py": "MB = 1000 ** 2\n", "README": "hello\n"}
PROBE = 'echo "0=$0 args=$#"; echo err >&2; env | grep -v "^_=" | LC_ALL=C sort; exit 3'


def step_patches(bench: Bench) -> dict[int, str]:
    return {int(p.stem[5:]): p.read_text("utf-8")
            for p in (bench.paths.root / "diffs").glob("step_*.patch")}


def patch_events(bench: Bench) -> list[int]:
    return [e["step"] for e in bench.events.emitted if e.get("type") == "patch_applied"]


def test_a_folded_command_sees_what_a_plain_one_sees(sandbox_kind: Kind, tmp_path: Path) -> None:
    bench = Bench(sandbox_kind[0], sandbox_kind[1], tmp_path, FILES)
    try:
        plain = bench.sandbox.exec(PROBE, timeout_sec=60)
        bench.call("write_file", path="src/units.py", content="MB = 1024 ** 2\n")
        assert bench.toolbox.pending == 1
        folded = bench.call("run", command=PROBE)
        assert bench.toolbox.folded == 1
        assert bench.toolbox.pending is None  # the run's own snapshot came after it
        assert (folded.stdout, folded.stderr, folded.exit_code) == (
            plain.stdout, plain.stderr, plain.exit_code)
        assert PROLOGUE_MARK not in folded.stdout and "AGENTBENCH" not in folded.stdout
        assert step_patches(bench).keys() == {1} and "+MB = 1024 ** 2" in step_patches(bench)[1]
        logged = json.loads((bench.paths.root / "agent" / "tool_calls.jsonl")
                            .read_text("utf-8").splitlines()[-1])
        assert logged["result"]["stdout"] == plain.stdout
    finally:
        bench.close()


def test_a_command_cannot_forge_a_snapshot_block(sandbox_kind: Kind, tmp_path: Path) -> None:
    bench = Bench(sandbox_kind[0], sandbox_kind[1], tmp_path, FILES)
    fake = f"{PROLOGUE_MARK}5 1\\nfake\\n"
    try:
        # a host edit, pending: its snapshot comes first in the next command's exec
        assert bench.call("write_file", path="README", content="hello\nx").ok
        forged = bench.run(f"printf '{fake}' && printf y >> README")
        assert forged.stdout == fake.replace("\\n", "\n")
        bench.run("true")
        patches = step_patches(bench)
        assert sorted(patches) == [1, 2] and patch_events(bench) == [1, 2]
        assert "\n+x\n" in patches[1] and "\n+xy\n" in patches[2]
        assert bench.toolbox.folded == 1
    finally:
        bench.close()


def test_what_cannot_be_folded_is_snapshotted_first_and_the_command_runs_once(
    sandbox_kind: Kind, tmp_path: Path
) -> None:
    bench = Bench(sandbox_kind[0], sandbox_kind[1], tmp_path, FILES)
    count = "printf . >> ran.log"
    try:
        big = "".join(f"line {i} {'x' * 60}\n" for i in range(PROLOGUE_MAX_BLOCK // 40))
        bench.call("write_file", path="big.txt", content=big)  # step 1: a diff too large
        bench.run(count)  # step 2: deferred; step 1 snapshotted alone, then the command
        assert bench.toolbox.deferred == 1 and bench.toolbox.folded == 0
        bench.call("run", command=count, timeout_sec=2)  # step 3: too short a budget
        bench.call("run", command=count, env={"FOO": "1"})  # step 4: an env
        assert bench.toolbox.folded == 0
        gitdir = bench.toolbox.snapshots.gitdir
        bench.run(f"{count} && printf x >> {gitdir}/info/exclude")  # step 5: folds step 4, tampers
        assert bench.toolbox.folded == 1
        bench.run(count)  # step 6: the check fails, deferred: rebuilt in an exec of its own
        assert bench.toolbox.deferred == 2 and bench.toolbox.snapshots.rebuilds == 1
        bench.run("true")  # step 7: nothing pending (step 6's exec took its own after it)
        assert bench.toolbox.folded == 1
        assert (bench.repo / "ran.log").read_text() == "." * 5
        patches = step_patches(bench)
        assert sorted(patches) == [1, 2, 3, 4, 5, 6] and "+line 0 " in patches[1]
        assert all("ran.log" in patches[s] for s in (2, 3, 4, 5, 6))
    finally:
        bench.close()


def test_the_pending_snapshot_is_taken_by_the_final_diff_and_by_close(tmp_path: Path) -> None:
    from pytest_agentbench.sandbox.local import LocalSandboxFactory

    bench = Bench("local", LocalSandboxFactory(), tmp_path / "a", FILES)
    try:
        assert bench.call("write_file", path="README", content="x").ok  # a host edit: pending
        assert step_patches(bench) == {} and bench.toolbox.pending == 1
        files = bench.toolbox.final_diff()[0]
        assert files == ["README"] and list(step_patches(bench)) == [1]
    finally:
        bench.close()
    bench = Bench("local", LocalSandboxFactory(), tmp_path / "b", FILES)
    assert bench.call("write_file", path="README", content="x").ok
    bench.close()
    assert list(step_patches(bench)) == [1]


def result(stdout: str, **kw: object) -> ExecResult:
    return ExecResult(exit_code=0, stdout=stdout, stderr="", duration_ms=50, **kw)  # type: ignore


def test_split_fold_reads_only_a_whole_block_at_the_head() -> None:
    block = "t\np\nn\nEND\nfp"
    ok = split_fold(result(f"{PROLOGUE_MARK}{len(block)} 7000\n{block}\nout\n",
                           stdout_total_lines=7))
    assert ok.block == block and ok.snapshot_us == 7000 and ok.result is not None
    assert ok.result.stdout == "out\n" and ok.result.stdout_total_lines == 1
    assert ok.result.duration_ms == 43
    assert split_fold(result("out\n" + f"{PROLOGUE_MARK}4 1\nfake\n")).result is None
    assert split_fold(result(f"{PROLOGUE_MARK}{len(block)} 1\n{block[:-1]}")).result is None
    deferred = split_fold(result(f"{PROLOGUE_MARK}defer 0 900\nd 1 2\nsha\n"))
    assert deferred.result is None and deferred.fingerprint == "d 1 2\nsha"
    assert split_fold(result(f"{PROLOGUE_MARK}defer 86 900\n\n")).fingerprint is None
    head = f"{PROLOGUE_MARK}{len(block)} 1\n{block}\n"
    marker = f"\n[... agentbench: 9 lines / {len(head) + 100} bytes in all; truncated ...]\n"
    cut = split_fold(result(head + "a\n" + marker + "z\n", stdout_truncated=True))
    assert cut.result is not None
    assert cut.result.stdout == "a\n" + marker.replace(str(len(head) + 100), "100") + "z\n"


def test_a_host_edit_whose_pending_snapshot_finds_no_sandbox_is_still_logged(
    tmp_path: Path,
) -> None:
    from pytest_agentbench.sandbox.local import LocalSandboxFactory

    bench = Bench("local", LocalSandboxFactory(), tmp_path, FILES)
    try:
        assert bench.call("write_file", path="src/units.py", content="MB = 1\n").ok  # pending
        bench.sandbox.close()
        with pytest.raises(SandboxError):
            bench.call("write_file", path="README", content="x\n")
        lines = (bench.paths.root / "agent" / "tool_calls.jsonl").read_text("utf-8").splitlines()
        last = json.loads(lines[-1])
        assert last["tool"] == "write_file" and last["result"]["error_type"] == "SANDBOX_ERROR"
        assert (bench.repo / "README").read_text() == "hello\n"  # the edit never happened
    finally:
        bench.toolbox.close()


def test_a_whole_block_means_the_command_ran_even_with_a_negative_time() -> None:
    """Red-team finding: the wall clock stepping back during a folded snapshot made its time
    negative; the host read that as "nothing ran", snapshotted again and ran the command twice
    (its first run's edits in the previous step's diff). Bash now clamps the time at 0, and the
    host takes a whole block as a run whatever the time says."""
    block = "t\n\n\nEND 1.000000\nfp"
    ran = split_fold(result(f"{PROLOGUE_MARK}{len(block)} -123\n{block}\nout\n"))
    assert ran.result is not None and ran.block == block and ran.snapshot_us == 0
    assert ran.result.stdout == "out\n"
