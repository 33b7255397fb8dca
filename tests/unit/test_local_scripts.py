"""The local sandbox's scripts around a command (sandbox/local_scripts.py): bounded by their own
time, their leftovers killed, a file read back without following a link (the protocol itself is
tests/contract/test_epilogue_contract.py, on every sandbox)."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from pytest_agentbench.sandbox import local_scripts
from pytest_agentbench.sandbox.local import LocalSandbox
from pytest_agentbench.sandbox.port import PROLOGUE_MARK, SandboxError, SandboxSpec


def sandbox(tmp_path: Path) -> LocalSandbox:
    (tmp_path / "ws").mkdir()
    return LocalSandbox(SandboxSpec(image="none", workspace=tmp_path / "ws",
                                    env_dir=tmp_path / "env"))


def test_a_prologue_that_overruns_its_bound_defers_and_the_command_never_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_scripts, "SCRIPT_MAX_SEC", 0.5)
    box = sandbox(tmp_path)
    started = time.monotonic()
    result = box.exec("touch ran", timeout_sec=30, prologue="echo tree; sleep 30")
    assert time.monotonic() - started < 5
    assert re.fullmatch(re.escape(PROLOGUE_MARK) + r"defer 124 \d+\n\n", result.stdout)
    assert not (tmp_path / "ws" / "ran").exists()


def test_a_scripts_leftovers_die_with_it(tmp_path: Path) -> None:
    box = sandbox(tmp_path)
    marker = tmp_path / "late"
    result = box.exec("true", timeout_sec=30,
                      epilogue=f"(sleep 1; touch {marker}) >/dev/null & echo done")
    assert result.epilogue_output == "done\n"
    time.sleep(1.5)
    assert not marker.exists()


def test_collect_reads_a_regular_file_only(tmp_path: Path) -> None:
    target = tmp_path / "results.xml"
    target.write_bytes(b"<xml/>")
    assert local_scripts.collect(target) == (True, b"<xml/>")
    link = tmp_path / "link.xml"
    link.symlink_to(target)
    assert local_scripts.collect(link) == (True, None)  # a link reads as no file
    fifo = tmp_path / "fifo.xml"
    os.mkfifo(fifo)
    assert local_scripts.collect(fifo) == (True, None)  # never opened: no hang
    assert local_scripts.collect(tmp_path / "missing.xml") == (True, None)
    big = tmp_path / "big.xml"
    big.write_bytes(b"x" * (local_scripts.COLLECT_MAX_BYTES + 1))
    assert local_scripts.collect(big) == (False, None)  # the caller reads it itself


def test_an_inline_prologue_is_bounded_by_the_budget_and_cut_short_reads_as_timed_out(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Scoring's apply runs inline: one cut short must read as such (core/score_phase.py never
    applies again over a half-applied copy), as a Docker exec that overran its deadline."""
    monkeypatch.setattr(local_scripts, "SCRIPT_MAX_SEC", 0.5)
    box = sandbox(tmp_path)
    started = time.monotonic()
    result = box.exec("touch ran", timeout_sec=1, prologue="sleep 30", inline_scripts=True)
    assert time.monotonic() - started < 6
    assert result.timed_out and result.stdout.startswith(PROLOGUE_MARK + "defer 124 ")
    assert not (tmp_path / "ws" / "ran").exists()
    # not inline: its own bound, and a deferral that is no timeout of the command's
    quick = box.exec("true", timeout_sec=1, prologue="exit 3")
    assert not quick.timed_out and quick.stdout.startswith(PROLOGUE_MARK + "defer 3 ")


def test_a_script_that_cannot_start_is_a_sandbox_error(tmp_path: Path) -> None:
    box = sandbox(tmp_path)
    (tmp_path / "ws" / "sub").mkdir()
    with pytest.raises(SandboxError, match="cannot start bash"):
        box.exec("cd .. && rmdir sub", timeout_sec=30, cwd="sub", epilogue="echo after")
