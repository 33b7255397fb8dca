"""What `agentbench validate-tasks --run` found for each task, kept where the reports find it,
and matched to the task content a run saw.

`validate-tasks --run` writes one file per task, `<output root>/.validation/<suite>/<task>.json`
(`write_validation`): its verdict, warnings and (with `--adequacy`) its adequacy score, with
the task's content fingerprint (tasks/fingerprint.py: every file of the task's directory) and
the repository commit it resolved. A later validation of the same task replaces the file; one
without `--adequacy` keeps the earlier adequacy when the fingerprint and commit are the same.

A report shows a task's adequacy (`lookup`) only when the file's fingerprint and commit are the
ones the run's attempt recorded (`task.sha256` beside its frozen task.yaml, and the record's
`task_commit`): a score of another version of the task is never shown as this one's. It fails
closed: a file that cannot be read, is not this format, or is for other content gives no score
and one line saying why (`AdequacyView.note`); no file gives no score and no line.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_agentbench.reporting.run_files import read_run_file
from pytest_agentbench.tasks.fingerprint import FINGERPRINT_FILE

VALIDATION_DIR = ".validation"
SCHEMA = "agentbench.validation"
SCHEMA_VERSION = 1
MAX_BYTES = 4 * 1024 * 1024
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class AdequacyView:
    """A task's adequacy as a report shows it: `score` (None: none shown), `flagged` (below
    the threshold it was validated with), the counts, and `note`, the one line saying why no
    score is shown ('' when there is nothing to say)."""

    score: float | None = None
    flagged: bool = False
    caught: int = 0
    graded: int = 0
    threshold: float | None = None
    validated_at: str = ""
    note: str = ""

    def cell(self) -> str:
        """`0.43 weak tests` / `1.00` / `—`."""
        if self.score is None:
            return "—"
        return f"{self.score:.2f}" + (" weak tests" if self.flagged else "")

    def title(self) -> str:
        """What the cell's tooltip says: the counts, the threshold, when it was validated."""
        if self.score is None:
            return self.note
        weak = f"below the threshold {self.threshold:.2f}: weak tests" if self.flagged \
            else f"threshold {self.threshold:.2f}"
        return (f"{self.caught}/{self.graded} mutants of the oracle fix caught; {weak}; "
                f"validated {self.validated_at or 'at an unknown time'}")

    def to_dict(self) -> dict[str, Any]:
        return {"score": self.score, "flagged": self.flagged, "caught": self.caught,
                "graded": self.graded, "threshold": self.threshold,
                "validated_at": self.validated_at or None, "note": self.note or None}


def validation_rel(suite: str, task_id: str) -> str | None:
    """`.validation/<suite>/<task>.json`, or None for a name that is no plain file name."""
    if not (_NAME.match(suite) and _NAME.match(task_id)):
        return None
    return f"{VALIDATION_DIR}/{suite}/{task_id}.json"


def write_validation(root: Path, suite: str, task_id: str, entry: dict[str, Any]) -> Path | None:
    """Write `entry` (with `fingerprint`, `task_commit`, `adequacy`...) as the task's file under
    the output root `root`, keeping an earlier adequacy of the same content when `entry` has
    none; None when the names cannot be a file name."""
    rel = validation_rel(suite, task_id)
    if rel is None:
        return None
    path = root / rel
    data = {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "suite": suite,
            "task_id": task_id, **entry}
    if data.get("adequacy") is None:
        old, _ = _read(root, rel)
        if old and (old.get("fingerprint"), old.get("task_commit")) == (
                data.get("fingerprint"), data.get("task_commit")) and old.get("adequacy"):
            data["adequacy"] = old["adequacy"]
            data["adequacy_validated_at"] = old.get("adequacy_validated_at") or \
                old.get("validated_at")
    elif "adequacy_validated_at" not in data:
        data["adequacy_validated_at"] = data.get("validated_at")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", "utf-8")
    os.replace(tmp, path)  # a report reading meanwhile sees the old file or the new one
    return path


def run_fingerprint(run_dir: Path, task_dir: str | None) -> str | None:
    """The fingerprint the attempt recorded (`<task_dir>/task.sha256`), or None."""
    if not task_dir:
        return None
    got = read_run_file(run_dir, f"{task_dir}/{FINGERPRINT_FILE}", 200)
    text = got.data.decode("utf-8", "replace").strip() if got.data is not None else ""
    return text if text.startswith("sha256:") else None


def lookup(root: Path, suite: str, task_id: str, fingerprint: str | None,
           commit: str | None) -> AdequacyView:
    """The adequacy to show for the task as a run saw it (see the module)."""
    rel = validation_rel(suite, task_id)
    if rel is None:
        return AdequacyView()
    data, why = _read(root, rel)
    shown = f"{root.name}/{rel}"
    if data is None:
        return AdequacyView(note=f"{task_id}: {shown}: {why}" if why else "")
    adequacy = data.get("adequacy")
    if adequacy is None:
        return AdequacyView()  # validated without --adequacy: nothing to show, nothing wrong
    if fingerprint is None:
        return AdequacyView(note=f"{task_id}: {shown}: the run recorded no task fingerprint "
                                 f"({FINGERPRINT_FILE}), so it cannot be matched to the run")
    if data.get("fingerprint") != fingerprint:
        return AdequacyView(note=f"{task_id}: {shown} validated other task content "
                                 f"({_short(data.get('fingerprint'))}, the run's "
                                 f"{_short(fingerprint)}): not shown")
    if commit and data.get("task_commit") != commit:
        return AdequacyView(note=f"{task_id}: {shown} validated commit "
                                 f"{_short(data.get('task_commit'))}, the run's "
                                 f"{_short(commit)}: not shown")
    return _view(adequacy, shown, task_id, str(data.get("adequacy_validated_at") or ""))


def _view(adequacy: Any, shown: str, task_id: str, when: str) -> AdequacyView:
    bad = AdequacyView(note=f"{task_id}: {shown}: field 'adequacy' is not an adequacy result")
    if not isinstance(adequacy, dict):
        return bad
    score: Any = adequacy.get("score")
    threshold: Any = adequacy.get("threshold")
    if score is None:
        return AdequacyView(note=f"{task_id}: no adequacy score ({adequacy.get('problem')})")
    if not _share(score) or not _share(threshold):
        return AdequacyView(note=f"{task_id}: {shown}: field 'adequacy.score' or "
                                 "'adequacy.threshold' is not a share from 0 to 1")
    caught, graded = adequacy.get("caught"), adequacy.get("graded")
    if not (isinstance(caught, int) and isinstance(graded, int)):
        caught, graded = 0, 0
    return AdequacyView(float(score), float(score) < float(threshold), int(caught), int(graded),
                        float(threshold), when)


def _read(root: Path, rel: str) -> tuple[dict[str, Any] | None, str]:
    """(the file's JSON object, '') or (None, why; '' when there is no file)."""
    if not root.is_dir():
        return None, ""
    got = read_run_file(root, rel, MAX_BYTES)
    if got.data is None:
        return None, "" if got.missing else got.why
    if got.cut:
        return None, f"larger than {MAX_BYTES} bytes"
    try:
        data = json.loads(got.data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        return None, f"not JSON ({str(exc)[:80]})"
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        return None, f"not an {SCHEMA} file (field 'schema')"
    if data.get("schema_version") != SCHEMA_VERSION:
        return None, f"field 'schema_version' is {data.get('schema_version')!r}, this " \
                     f"version reads {SCHEMA_VERSION}"
    return data, ""


def _share(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1


def _short(value: Any) -> str:
    text = str(value)
    return text[:19] + "…" if len(text) > 20 else text


def task_adequacy(run: Any, rows: list[dict[str, Any]]) -> list[str]:
    """Each task row of a run page gets its adequacy (`adequacy`, `adequacy_cls`,
    `adequacy_title`, `adequacy_view`: None when there is nothing to show), from the run's
    output root (its parent folder); the lines saying why a score is not shown."""
    root = Path(run.path).resolve().parent
    notes = []
    for row in rows:
        view = lookup(root, str(row["suite"]), str(row["task_id"]),
                      run_fingerprint(Path(run.path), row.get("task_dir")),
                      row.get("task_commit") or None)
        row["adequacy_view"] = view if view.score is not None or view.note else None
        row["adequacy"] = view.cell()
        row["adequacy_cls"] = "fail" if view.flagged else ""
        row["adequacy_title"] = view.title()
        if view.flagged:
            row["search"] = f"{row['search']} weak tests"
        if view.note:
            notes.append(f"Adequacy not shown for {view.note}")
    return notes


def runs_adequacy(runs: Sequence[Any], task_ids: Iterable[str]) -> tuple[dict[str, Any], list[str]]:
    """Per task of `report tasks`, its adequacy (`AdequacyView.to_dict`, or None when no run
    has a validation to show), over every run that holds it: a score only when each run saw
    the validated content; and the lines saying why a score is not shown."""
    views: dict[str, list[AdequacyView]] = {}
    for run in runs:
        df = run.attempts
        firsts = df.drop_duplicates("task_id")
        root = Path(run.path).resolve().parent
        for rec in firsts.to_dict("records"):
            task_id = str(rec["task_id"])
            views.setdefault(task_id, []).append(lookup(
                root, str(rec["suite"]), task_id,
                run_fingerprint(Path(run.path), str(rec.get("task_dir") or "")),
                str(rec.get("task_commit") or "") or None))
    out: dict[str, Any] = {}
    notes: list[str] = []
    for task_id in task_ids:
        seen = views.get(task_id, [])
        noted = [v.note for v in seen if v.note]
        scored = {(v.score, v.flagged) for v in seen if v.score is not None}
        if noted:
            notes.append(noted[0] + (f" (and {len(noted) - 1} more run(s))"
                                     if len(noted) > 1 else ""))
            out[task_id] = AdequacyView(note=noted[0]).to_dict()
        elif len(scored) > 1 or (scored and any(v.score is None for v in seen)):
            why = f"{task_id}: the runs saw task content validated in one but not another"
            notes.append(why)
            out[task_id] = AdequacyView(note=why).to_dict()
        elif scored:
            out[task_id] = next(v for v in seen if v.score is not None).to_dict()
        else:
            out[task_id] = None
    return out, notes
