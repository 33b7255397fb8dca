"""`agentbench view`: the URL it prints, Ctrl-C, the root it picks, bad input as one line."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from pytest_agentbench.cli.main import main
from pytest_agentbench.cli.view import pick_root
from tests.support.viewer_roots import paired_root


def test_prints_its_url_serves_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    root = paired_root(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest_agentbench.cli.main", "view", str(root), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith(f"agentbench view: serving {root} at http://127.0.0.1:"), line
        url = line.split(" at ")[1].split()[0]
        with urllib.request.urlopen(url + "_api/runs", timeout=10) as resp:  # noqa: S310
            names = [r["name"] for r in json.load(resp)["runs"]]
        assert names == ["run-b", "run-a"]  # newest first
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_folder_holding_runs_means_its_runs(tmp_path: Path) -> None:
    root = paired_root(tmp_path)  # tmp_path/runs
    assert pick_root(tmp_path) == root
    assert pick_root(root) == root


def test_bad_input_is_one_line(tmp_path: Path, capsys: object) -> None:
    assert main(["view", str(tmp_path / "nope"), "--port", "0"]) == 2
    assert main(["view", str(tmp_path), "--port", "70000"]) == 2
    err = capsys.readouterr().err.splitlines()  # type: ignore[attr-defined]
    assert err == [f"agentbench view: {tmp_path / 'nope'}: no such output root (a directory "
                   "of runs)", "agentbench view: --port 70000: expected 0..65535"]
