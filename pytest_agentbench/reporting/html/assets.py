"""The style sheet and script the HTML pages inline (no network, no external files), kept as
real files beside this module: report.css and report.js.

The script builds each task's drill-down only when it is first opened (lazy rendering), and puts
every value from the run into the page with `textContent`, never as markup: the content is
untrusted agent output.
"""

from __future__ import annotations

from importlib import resources

_HERE = resources.files(__package__)
CSS = (_HERE / "report.css").read_text(encoding="utf-8")
JS = (_HERE / "report.js").read_text(encoding="utf-8")
