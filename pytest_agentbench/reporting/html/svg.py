"""Chart geometry for the HTML pages: each chart is a dict (width, height, label, shapes) whose
shapes (`rect`, `line`, `path`, `circle`, `text`) the `svg.html.j2` macro draws, escaping every
label. Numbers are formatted here, so the templates hold no arithmetic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from pytest_agentbench.reporting.html.env import pct

Shape = dict[str, Any]
BLAME_COLORS = {"agent": "#cf222e", "task": "#8c959f", "infra": "#bf8700"}
_INK, _AXIS, _BLUE, _OK, _BAD = "#1f2328", "#999", "#54aeff", "#1a7f37", "#cf222e"


def _f(x: float) -> str:
    return f"{x:.1f}"


def text(x: float, y: float, label: str, anchor: str = "start", size: int = 11,
         rotate: bool = False) -> Shape:
    return {"k": "text", "x": _f(x), "y": _f(y), "text": label, "anchor": anchor,
            "size": size, "rotate": rotate}


def rect(x: float, y: float, w: float, h: float, fill: str, title: str = "") -> Shape:
    return {"k": "rect", "x": _f(x), "y": _f(y), "w": _f(max(w, 0.0)), "h": _f(max(h, 0.0)),
            "fill": fill, "title": title}


def line(x1: float, y1: float, x2: float, y2: float, stroke: str = _AXIS,
         dash: str = "") -> Shape:
    return {"k": "line", "x1": _f(x1), "y1": _f(y1), "x2": _f(x2), "y2": _f(y2),
            "stroke": stroke, "dash": dash}


def path(d: str, stroke: str = _INK, width: float = 1.5, cls: str = "") -> Shape:
    return {"k": "path", "d": d, "stroke": stroke, "width": width, "cls": cls}


def circle(x: float, y: float, r: float, fill: str, title: str = "", stroke: str = "none",
           cls: str = "") -> Shape:
    return {"k": "circle", "x": _f(x), "y": _f(y), "r": r, "fill": fill, "title": title,
            "stroke": stroke, "cls": cls}


def chart(width: int, height: int, shapes: list[Shape], label: str,
          cls: str = "") -> dict[str, Any]:
    return {"width": width, "height": height, "shapes": shapes, "label": label, "cls": cls}


def nice_ticks(top: float, n: int = 4, whole: bool = False) -> list[float]:
    """Round tick values from 0 to at least `top` (1, 2 or 5 times a power of ten apart;
    `whole`: at least 1 apart, for counts)."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    if whole:
        step = max(step, 1)
    count = math.ceil(top / step - 1e-9)
    return [i * step for i in range(count + 1)]


def _tick(x: float) -> str:
    return f"{x:.4g}"


def rate_chart(rows: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """Horizontal pass-rate bars with their Wilson interval, one per (name, rate row)."""
    left, width, bar_h, gap = 130, 260, 16, 8
    height = 20 + len(rows) * (bar_h + gap)
    shapes = [line(left, 4, left, height - 14)]
    for p in (0.0, 0.5, 1.0):
        shapes.append(text(left + p * width, height - 2, f"{p * 100:.0f}%", "middle", 10))
    for i, (name, r) in enumerate(rows):
        y = 6 + i * (bar_h + gap)
        shapes.append(text(left - 6, y + 12, name[:20], "end"))
        if r.get("rate") is None:
            shapes.append(text(left + 4, y + 12, "no scored attempts"))
            continue
        shapes.append(rect(left, y, r["rate"] * width, bar_h, _BLUE, f"{name}: {pct(r['rate'])}"))
        lo, hi, mid = left + r["ci_low"] * width, left + r["ci_high"] * width, y + bar_h / 2
        shapes.append(path(f"M{lo:.1f} {mid - 5:.1f}v10M{lo:.1f} {mid:.1f}H{hi:.1f}"
                           f"M{hi:.1f} {mid - 5:.1f}v10"))
        shapes.append(text(left + width + 6, y + 12, f"{pct(r['rate'])} (n={r['scored']})"))
    return chart(left + width + 90, height, shapes, "pass rate by suite")


def taxonomy_chart(by_reason: list[dict[str, Any]]) -> dict[str, Any] | None:
    if not by_reason:
        return None
    left, width, bar_h, gap = 170, 220, 14, 6
    top = max(r["count"] for r in by_reason)
    height = 8 + len(by_reason) * (bar_h + gap)
    shapes = []
    for i, r in enumerate(by_reason):
        y = 4 + i * (bar_h + gap)
        w = width * r["count"] / top
        shapes.append(text(left - 6, y + 11, str(r["reason"]), "end"))
        shapes.append(rect(left, y, w, bar_h, BLAME_COLORS.get(str(r["blame"]), _AXIS),
                           f"{r['reason']} ({r['blame']}): {r['count']}"))
        shapes.append(text(left + w + 4, y + 11, f"{r['count']} · {r['blame']}"))
    return chart(left + width + 90, height, shapes, "failure taxonomy")


def histogram(values: np.ndarray, passed: np.ndarray, unit: str, bins: int = 20,
              ) -> dict[str, Any] | None:
    """Stacked passed/failed histogram with a y axis (attempts) and x ticks in `unit`."""
    keep = ~np.isnan(values)
    values, passed = values[keep], passed[keep]
    if len(values) == 0:
        return None
    lo = float(values.min())
    hi = float(values.max()) if values.max() > values.min() else lo + 1.0
    edges = np.linspace(lo, hi, bins + 1)
    ok, _ = np.histogram(values[passed], edges)
    bad, _ = np.histogram(values[~passed], edges)
    left, top_pad, width, base = 44, 10, 340, 130
    ticks = nice_ticks(float(max(int((ok + bad).max()), 1)), whole=True)
    ymax = ticks[-1]
    scale = (base - top_pad) / ymax
    shapes = [line(left, base, left + width, base), line(left, top_pad, left, base),
              text(10, (base + top_pad) / 2, "attempts", "middle", 10, rotate=True)]
    for t in ticks:
        y = base - t * scale
        shapes += [line(left - 4, y, left, y), text(left - 6, y + 3, f"{t:g}", "end", 10)]
        if t:
            shapes.append(line(left, y, left + width, y, "#eee"))
    step = width / bins
    for i in range(bins):
        x = left + i * step
        h_ok, h_bad = ok[i] * scale, bad[i] * scale
        tip = f"{edges[i]:.4g}–{edges[i + 1]:.4g} {unit}: {ok[i]} passed, {bad[i]} failed"
        shapes.append(rect(x + 1, base - h_ok, step - 2, h_ok, _OK, tip))
        shapes.append(rect(x + 1, base - h_ok - h_bad, step - 2, h_bad, _BAD, tip))
    for frac in (0.0, 0.5, 1.0):
        x = left + frac * width
        shapes += [line(x, base, x, base + 4),
                   text(x, base + 15, _tick(lo + frac * (hi - lo)), "middle", 10)]
    shapes.append(text(left + width / 2, base + 30, f"{unit} · green passed, red failed",
                       "middle", 10))
    return chart(left + width + 30, base + 36, shapes, f"histogram ({unit})")


def pass_at_k_chart(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """pass@k (unbiased, blue) and pass^k (all k attempts pass, orange) against k."""
    pts = [r for r in rows if r.get("value") is not None]
    if not pts:
        return None
    left, top_pad, width, base = 44, 10, 320, 150
    kmax = max(int(r["k"]) for r in pts)
    kmin = min(int(r["k"]) for r in pts)
    span = max(kmax - kmin, 1)

    def xy(k: int, v: float) -> tuple[float, float]:
        return left + (k - kmin) / span * width, base - v * (base - top_pad)

    shapes = [line(left, base, left + width, base), line(left, top_pad, left, base),
              text(10, (base + top_pad) / 2, "share of tasks", "middle", 10, rotate=True)]
    for v in (0.0, 0.25, 0.5, 0.75, 1.0):
        _, y = xy(kmin, v)
        shapes += [line(left - 4, y, left, y), text(left - 6, y + 3, pct(v, 0), "end", 10)]
        if v:
            shapes.append(line(left, y, left + width, y, "#eee"))
    for k in sorted({int(r["k"]) for r in pts}):
        x, _ = xy(k, 0)
        shapes += [line(x, base, x, base + 4), text(x, base + 15, str(k), "middle", 10)]
    shapes.append(text(left + width / 2, base + 30, "k (attempts per task)", "middle", 10))
    series = [("value", "pass@k", "#0969da", "pass-at-k"),
              ("pass_hat_k", "pass^k", "#d1580f", "pass-hat-k")]
    legend_y = top_pad + 4
    for key, name, color, cls in series:
        got = [(int(r["k"]), float(r[key])) for r in pts if r.get(key) is not None]
        if not got:
            continue
        d = "".join(("M" if i == 0 else "L") + "{:.1f} {:.1f}".format(*xy(k, v))
                    for i, (k, v) in enumerate(got))
        shapes.append(path(d, color, 2, cls))
        for k, v in got:
            x, y = xy(k, v)
            shapes.append(circle(x, y, 3, color, f"{name}, k={k}: {pct(v)}", cls=cls))
        shapes += [line(left + width + 12, legend_y, left + width + 26, legend_y, color),
                   text(left + width + 30, legend_y + 4, name, "start", 10)]
        legend_y += 14
    return chart(left + width + 80, base + 36, shapes, "pass@k and pass^k by k")


def frontier_chart(points: list[dict[str, Any]], x_label: str) -> dict[str, Any] | None:
    """Each run at (cost, pass rate) with its interval as a vertical error bar; the runs on
    the Pareto frontier (`frontier` true) filled and joined by a line, the others hollow.
    `points`: dicts with name, cost, rate, ci_low, ci_high, frontier (cost None: left out)."""
    pts = [p for p in points if p.get("cost") is not None and p.get("rate") is not None]
    if not pts:
        return None
    left, top_pad, width, base = 56, 12, 440, 250
    ticks_x = nice_ticks(max(float(p["cost"]) for p in pts) * 1.08 or 1.0, 5)
    xmax = ticks_x[-1] or 1.0

    def xy(cost: float, rate: float) -> tuple[float, float]:
        return left + cost / xmax * width, base - rate * (base - top_pad)

    shapes = [line(left, base, left + width, base), line(left, top_pad, left, base),
              text(12, (base + top_pad) / 2, "pass rate", "middle", 10, rotate=True),
              text(left + width / 2, base + 32, x_label, "middle", 10)]
    for v in (0.0, 0.25, 0.5, 0.75, 1.0):
        _, y = xy(0, v)
        shapes += [line(left - 4, y, left, y), text(left - 6, y + 3, pct(v, 0), "end", 10)]
        if v:
            shapes.append(line(left, y, left + width, y, "#eee"))
    for t in ticks_x:
        x, _ = xy(t, 0)
        shapes += [line(x, base, x, base + 4), text(x, base + 16, f"${t:.4g}", "middle", 10)]
    front = sorted((p for p in pts if p["frontier"]), key=lambda p: (p["cost"], p["rate"]))
    if len(front) > 1:
        d = "".join(("M" if i == 0 else "L") + "{:.1f} {:.1f}".format(*xy(p["cost"], p["rate"]))
                    for i, p in enumerate(front))
        shapes.append(path(d, "#1a7f37", 2, "frontier-line"))
    for p in pts:
        x, y = xy(float(p["cost"]), float(p["rate"]))
        if p.get("ci_low") is not None:
            _, lo = xy(0, float(p["ci_low"]))
            _, hi = xy(0, float(p["ci_high"]))
            shapes.append(path(f"M{x - 4:.1f} {lo:.1f}h8M{x:.1f} {lo:.1f}V{hi:.1f}"
                               f"M{x - 4:.1f} {hi:.1f}h8", "#59636e", 1, "error-bar"))
        on = bool(p["frontier"])
        tip = (f"{p['name']}: {pct(p['rate'])} [{pct(p.get('ci_low'))}, "
               f"{pct(p.get('ci_high'))}], ${float(p['cost']):.4g}"
               + (" · on the frontier" if on else " · dominated"))
        shapes.append(circle(x, y, 5, "#1a7f37" if on else "#fff", tip,
                             stroke="#1a7f37" if on else "#59636e",
                             cls="point frontier" if on else "point dominated"))
        shapes.append(_point_label(x, y, str(p["name"])[:28], left + width / 2))
    return chart(left + width + 150, base + 40, shapes, "cost vs pass rate")


def _point_label(x: float, y: float, name: str, middle: float) -> Shape:
    """A point's name beside it, inside the chart: below the point when it is near the top
    (a run at 100% had its name cut off), left of it on the right half (a long name ran past
    the right edge)."""
    label_y = y - 6 if y - 6 >= 14 else y + 17
    if x > middle:
        return text(x - 8, label_y, name, "end", 11)
    return text(x + 8, label_y, name, "start", 11)
