"""An output root (`reports/runs` by default) holds generated runs only, and says so to the tools
that walk a project: a `.gitignore` of `*` (git), and a marker file that the always-loaded pytest
entry point reads, so a plain `pytest` never collects the copies of the project's own tests that
`--agentbench-keep-workspace` keeps under `<run>/tasks/<id>/repo/` (they failed with "import
file mismatch"). pytest's norecursedirs cannot do it: a project's ini that sets it drops the
defaults.

A directory is marked only while it holds nothing but runs (run directories, the `latest` link,
the runs index, these files): an output root pointed at a directory of the user's own is left
as it is.
"""

from __future__ import annotations

from pathlib import Path

MARKER = ".agentbench-output-root"
GITIGNORE = ".gitignore"
RUN_FILE = "run.json"
LATEST = "latest"
INDEX_FILES = ("index.html", ".index_cache.json", ".index.lock")  # reporting/html/index.py
_MARKER_TEXT = ("This directory holds pytest-agentbench runs (generated). pytest does not collect "
                "below it while pytest-agentbench is installed; git ignores it (.gitignore).\n")
_GITIGNORE_TEXT = "# pytest-agentbench's output root: generated runs, never committed\n*\n"


def is_output_root(path: Path) -> bool:
    """True for a directory marked as an output root (one stat: cheap for every path pytest
    walks)."""
    return (path / MARKER).is_file()


def mark_output_root(out: Path) -> bool:
    """Mark `out` (a directory) as an output root when it holds only runs; True when it is
    marked afterwards. Never overwrites a file there; never raises for a write that fails."""
    if is_output_root(out):
        return True
    try:
        entries = list(out.iterdir())
    except OSError:
        return False
    if not all(_is_ours(entry) for entry in entries):
        return False
    try:
        for name, text in ((GITIGNORE, _GITIGNORE_TEXT), (MARKER, _MARKER_TEXT)):
            target = out / name
            if not target.exists() and not target.is_symlink():
                with open(target, "x", encoding="utf-8") as handle:
                    handle.write(text)
    except OSError:
        return False
    return is_output_root(out)


def _is_ours(entry: Path) -> bool:
    if entry.name in (LATEST, MARKER, GITIGNORE, *INDEX_FILES):
        return True
    return entry.is_dir() and not entry.is_symlink() and (entry / RUN_FILE).is_file()


def unmark_if_empty(out: Path) -> None:
    """Take the marks back from an output root left with no run (a new run that recorded
    nothing is discarded): it is as it was before the run."""
    try:
        names = {p.name for p in out.iterdir()}
    except OSError:
        return
    if names <= {MARKER, GITIGNORE} and MARKER in names:
        for name in names:
            (out / name).unlink(missing_ok=True)
