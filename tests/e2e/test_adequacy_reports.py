"""The adequacy score where a user looks (issue 24 item 3): `validate-tasks --run --adequacy`
keeps each task's score under the output root's .validation/; the run page and `report tasks`
of a run of that same task content show it, with "weak tests" below the threshold. Once the
task's files change, a new run's page shows no score and one line saying why (the old run's
page still shows its score: it saw the validated content); a validation file that cannot be
read gives no score and a line, never a crash. Local sandbox: no Docker needed."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.adversarial.test_exploit_agent import shapes_task
from tests.support.plugin_runs import run_env
from tests.support.run_dirs import run_dirs

ROOT = Path(__file__).resolve().parents[2]
RETURNS_SOMETHING = "from shapes import area\n\n\ndef test_area():\n    assert area(2, 3)\n"


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_agentbench.cli.main", *args],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path,
                          env=run_env(tmp_path / "home"))


def _plugin_run(tmp_path: Path, out: Path, name: str) -> Path:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
         "--agentbench-suite", "synth", f"--agentbench-taskpacks={tmp_path / 'taskpacks'}",
         f"--agentbench-out={out}", "--agentbench-sandbox=local",
         f"--agentbench-run-name={name}"],
        cwd=tmp_path, env=run_env(tmp_path / "home"), capture_output=True, text=True,
        timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    (run_dir,) = [d for d in run_dirs(out) if d.name == name]
    return run_dir


def _adequacy_cell(html: str) -> str | None:
    row = re.search(r'<tr class="task" id="task-shapes".*?</tr>', html, re.S)
    assert row, html[-2000:]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(0), re.S)
    return cells[6] if len(cells) > 6 else None


def test_the_score_is_shown_for_the_validated_content_only(tmp_path: Path) -> None:
    task_yaml = shapes_task(tmp_path, RETURNS_SOMETHING)
    out = tmp_path / "out"
    proc = _cli(tmp_path, "validate-tasks", "--suite", "synth", "--taskpacks",
                str(tmp_path / "taskpacks"), "--run", "--sandbox", "local", "--exploit", "none",
                "--adequacy", "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    kept = out / ".validation" / "synth" / "shapes.json"
    assert json.loads(kept.read_text())["adequacy"]["score"] == 0.5

    first = _plugin_run(tmp_path, out, "first")
    html = (first / "report.html").read_text()
    assert _adequacy_cell(html) == "0.50 weak tests"
    assert "1/2 mutants of the oracle fix caught; below the threshold 0.60" in html
    tasks = _cli(tmp_path, "report", "tasks", "--out", str(out))
    assert tasks.returncode == 0, tasks.stderr
    assert "| signal | adequacy |" in tasks.stdout and "| 0.50 weak tests |" in tasks.stdout

    # the task changes after the validation: a run of the new content gets no score
    task_yaml.write_text(task_yaml.read_text().replace("id: shapes", "id: shapes\n"
                                                       "description: changed since"))
    second = _plugin_run(tmp_path, out, "second")
    html = (second / "report.html").read_text()
    assert _adequacy_cell(html) == "—"
    (note,) = re.findall(r'<p class="note adequacy-note">(.*?)</p>', html)
    assert "shapes.json validated other task content" in note, note
    assert _adequacy_cell((first / "report.html").read_text()) == "0.50 weak tests"
    both = _cli(tmp_path, "report", "tasks", "--out", str(out), "--format", "json")
    row = json.loads(both.stdout)["tasks"][0]
    assert row["adequacy"]["score"] is None and "validated other task content" in \
        row["adequacy"]["note"]

    # a validation file that cannot be read: no score, one line, exit 0
    kept.write_text("{not json")
    again = _cli(tmp_path, "report", "html", "--run", str(first))
    assert again.returncode == 0, again.stderr
    html = (first / "report.html").read_text()
    assert _adequacy_cell(html) == "—"
    (note,) = re.findall(r'<p class="note adequacy-note">(.*?)</p>', html)
    assert "shapes.json: not JSON" in note, note
