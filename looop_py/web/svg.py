"""Inline SVG charts (pure: data in, markup out; no script, no external asset)."""

from __future__ import annotations

import itertools
import time
from html import escape
from typing import Any

COLORS = {
    "decided": "#2b7de9",
    "skipped": "#b9c2cc",
    "held": "#e0a400",
    "failed": "#d93a3a",
    "locked": "#8a63d2",
}


def timeline(beats: list[dict[str, Any]], now: float, hours: int = 24, step_h: int = 1) -> str:
    """Beats per `step_h` hours over the last `hours`, stacked by outcome, with a legend."""
    width, height, top, bottom, left = 720, 180, 10, 30, 34
    plot_h = height - top - bottom
    n_cols = hours // step_h
    step = step_h * 3600
    col_w = (width - left - 10) / n_cols
    start = now - hours * 3600
    buckets: list[dict[str, int]] = [{} for _ in range(n_cols)]
    for b in beats:
        i = int((b["t"] - start) // step)
        if 0 <= i < n_cols:
            o = str(b.get("outcome"))
            buckets[i][o] = buckets[i].get(o, 0) + 1
    peak = max([sum(b.values()) for b in buckets] + [1])
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" '
        f'viewBox="0 0 {width} {height + 20}" width="100%" '
        f'aria-label="beats per {step_h} h over the last {hours} hours, by outcome">',
        f'<text x="2" y="{top + 10}" class="ax">{peak}</text>',
        f'<text x="2" y="{top + plot_h}" class="ax">0</text>',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{width - 10}" y2="{top + plot_h}" '
        'stroke="#889" stroke-width="1"/>',
    ]
    for i, bucket in enumerate(buckets):
        x = left + i * col_w
        y = float(top + plot_h)
        for outcome, color in COLORS.items():
            n = bucket.get(outcome, 0)
            if not n:
                continue
            h = plot_h * n / peak
            y -= h
            parts.append(
                f'<rect x="{x + 1:.1f}" y="{y:.1f}" width="{col_w - 2:.1f}" height="{h:.1f}" '
                f'fill="{color}" class="bar-{outcome}"><title>{n} {outcome}</title></rect>'
            )
        if i % 3 == 0:
            fmt = "%H:%M" if step_h == 1 else "%a %H:%M"
            label = time.strftime(fmt, time.localtime(start + i * step))
            parts.append(f'<text x="{x:.1f}" y="{height - 12}" class="ax">{label}</text>')
    parts.append(_legend(list(COLORS.items()), height + 6, left))
    parts.append("</svg>")
    return "".join(parts)


def _legend(items: list[tuple[str, str]], y: int, left: int) -> str:
    out = []
    for i, (name, color) in enumerate(items):
        x = left + i * 95
        out.append(
            f'<rect x="{x}" y="{y}" width="10" height="10" fill="{color}"/>'
            f'<text x="{x + 14}" y="{y + 9}" class="ax">{escape(name)}</text>'
        )
    return "".join(out)


def spend_bars(days: list[dict[str, Any]], key: str, budget: float, unit: str) -> str:
    """One bar per day of `key` (tokens or usd), with the daily budget as a dashed line."""
    width, height, top, bottom, left = 360, 150, 12, 24, 50
    plot_h = height - top - bottom
    values = [float(d.get(key) or 0) for d in days]
    peak = max([*values, budget, 1e-9])
    col_w = (width - left - 10) / max(1, len(days))

    def fmt(v: float) -> str:
        return f"${v:.2f}" if unit == "USD" else f"{int(v)}"

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" '
        f'viewBox="0 0 {width} {height}" width="100%" aria-label="{unit} per day vs budget">',
        f'<text x="2" y="{top + 8}" class="ax">{fmt(peak)}</text>',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{width - 10}" y2="{top + plot_h}" '
        'stroke="#889"/>',
    ]
    for i, (d, v) in enumerate(zip(days, values, strict=True)):
        h = plot_h * v / peak
        x = left + i * col_w
        over = budget > 0 and v >= budget
        found = d.get("by_source")
        sources: dict[str, Any] = found if isinstance(found, dict) else {}
        split = ", ".join(
            f"{src} {fmt(float(row.get(key) or 0))}"
            for src, row in sources.items()
            if isinstance(row, dict)
        )
        title = f"{d.get('day')}: {fmt(v)}" + (f" ({split})" if split else "")
        parts.append(
            f'<rect x="{x + 3:.1f}" y="{top + plot_h - h:.1f}" width="{col_w - 6:.1f}" '
            f'height="{h:.1f}" fill="{"#d93a3a" if over else "#2b7de9"}" class="spend">'
            f"<title>{escape(title)}</title></rect>"
            f'<text x="{x + 3:.1f}" y="{height - 8}" class="ax">'
            f"{escape(str(d.get('day', ''))[5:])}</text>"
        )
    if budget > 0:
        y = top + plot_h - plot_h * budget / peak
        parts.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{width - 10}" y2="{y:.1f}" stroke="#d93a3a" '
            f'stroke-dasharray="5,4" class="budget"><title>budget {fmt(budget)}</title></line>'
        )
    parts.append("</svg>")
    return "".join(parts)


def series(points: list[tuple[float, float]], label: str) -> str:
    """A numeric signal over time as a step line (the value holds until the next reading)."""
    if not points:
        return ""
    width, height, top, bottom, left = 720, 140, 10, 24, 54
    plot_w, plot_h = width - left - 10, height - top - bottom
    t0, t1 = points[0][0], max(points[-1][0], points[0][0] + 1)
    lo, hi = min(v for _, v in points), max(v for _, v in points)
    if hi == lo:
        lo, hi = lo - 1, hi + 1

    def x(t: float) -> float:
        return round(left + (t - t0) / (t1 - t0) * plot_w, 1)

    def y(v: float) -> float:
        return round(top + (hi - v) / (hi - lo) * plot_h, 1)

    path = f"M{x(points[0][0])},{y(points[0][1])}"
    for (_, prev), (t, v) in itertools.pairwise(points):
        path += f" H{x(t)} V{y(v)}" if v != prev else f" H{x(t)}"
    path += f" H{left + plot_w}"
    fmt = "%m-%d %H:%M"
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart series" role="img" '
        f'viewBox="0 0 {width} {height}" width="100%" aria-label="{escape(label)} over time">'
        f'<text x="2" y="{top + 10}" class="ax">{hi:g}</text>'
        f'<text x="2" y="{top + plot_h}" class="ax">{lo:g}</text>'
        f'<path d="{path}" fill="none" stroke="#2b7de9" stroke-width="2"/>'
        f'<text x="{left}" y="{height - 6}" class="ax">'
        f"{time.strftime(fmt, time.localtime(t0))}</text>"
        f'<text x="{width - 10}" y="{height - 6}" class="ax" text-anchor="end">'
        f"{time.strftime(fmt, time.localtime(t1))}</text></svg>"
    )
