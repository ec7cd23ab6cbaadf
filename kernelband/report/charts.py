"""Speedup-over-iterations charts: inline SVG for the HTML report, PNG through matplotlib (Agg)."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from pathlib import Path

from kernelband.report.data import ReportData

COLORS = ("#2f6fde", "#d9480f", "#2b8a3e", "#862e9c", "#c92a2a", "#0b7285")


@dataclass(frozen=True)
class Series:
    """One target: every child with a speedup as a point (a measured one with its 95% interval
    as a vertical bar), and the best so far as a line."""

    target: str
    label: str
    points: tuple[tuple[int, float], ...]
    best: tuple[tuple[int, float], ...]
    intervals: tuple[tuple[int, float, float], ...] = ()  # (x, low, high) of paired points
    texts: tuple[str, ...] = ()  # each point as shown in tables ("1.18x [1.12, 1.24]")


def speedup_series(data: ReportData) -> list[Series]:
    """Per target: x = child index in the track, y = speedup on that target (paired point or
    labelled estimate; a child measured without pairing has no point)."""
    out = []
    for track in data.job["tracks"]:
        target = track["target"]
        label = (track.get("best") or {}).get("label")
        children = [c for c in data.candidates if c["target"] == target and c["lineage_depth"] > 0]
        points, best, intervals, texts = [], [(0, 1.0)], [], []
        for index, c in enumerate(children, start=1):
            own = [m for m in c["measurements"] if m["target"] == target and m.get("speedup")]
            if c["status"] != "measured" or not own:
                continue
            m = own[-1]
            label = label or m["label"]
            points.append((index, float(m["speedup"])))
            texts.append(str(m.get("speedup_text") or f"{m['speedup']:.2f}x"))
            if m.get("speedup_low") is not None and m.get("speedup_high") is not None:
                intervals.append((index, float(m["speedup_low"]), float(m["speedup_high"])))
            best.append((index, max(best[-1][1], points[-1][1])))
        out.append(Series(target, label or "no time yet", tuple(points), tuple(best),
                          tuple(intervals), tuple(texts)))
    return out


def svg_chart(series: list[Series], width: int = 760, height: int = 300) -> str:
    """A self-contained SVG element (no scripts, no external references)."""
    left, right, top, bottom = 56, 160, 16, 40
    xs = [x for s in series for x, _ in s.points] + [1]
    ys = [y for s in series for _, y in (*s.points, *s.best)] + [1.0]
    ys += [v for s in series for _, low, high in s.intervals for v in (low, high)]
    x_max, y_max, y_min = max(xs), max(ys) * 1.1, min(0.0, *ys)

    def sx(x: float) -> float:
        return left + x / x_max * (width - left - right)

    def sy(y: float) -> float:
        return height - bottom - (y - y_min) / ((y_max - y_min) or 1) * (height - top - bottom)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img">',
             f'<line x1="{left}" y1="{height - bottom}" x2="{width - right}" y2="{height - bottom}" stroke="#999"/>',
             f'<line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" stroke="#999"/>']
    for i in range(5):
        y = y_min + (y_max - y_min) * i / 4
        parts.append(f'<text x="{left - 6}" y="{sy(y) + 4:.1f}" text-anchor="end" font-size="11">{y:.2f}x</text>')
    parts.append(f'<text x="{(left + width - right) / 2}" y="{height - 8}" text-anchor="middle" '
                 'font-size="12">iteration (child index in track)</text>')
    for i, s in enumerate(series):
        color = COLORS[i % len(COLORS)]
        path = " ".join(f"{'L' if j else 'M'}{sx(x):.1f},{sy(y):.1f}" for j, (x, y) in enumerate(s.best))
        parts.append(f'<path d="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
        parts += [f'<line class="ci" x1="{sx(x):.1f}" y1="{sy(low):.1f}" x2="{sx(x):.1f}" '
                  f'y2="{sy(high):.1f}" stroke="{color}" stroke-width="1.5"/>'
                  for x, low, high in s.intervals]
        texts = s.texts or tuple(f"{y:.3f}x" for _, y in s.points)
        parts += [f'<circle class="pt" cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3.5" fill="{color}" '
                  f'fill-opacity="0.55"><title>{escape(text)} ({escape(s.label)})</title></circle>'
                  for (x, y), text in zip(s.points, texts, strict=False)]
        parts.append(f'<text x="{width - right + 10}" y="{top + 14 + 18 * i}" fill="{color}" '
                     f'font-size="12">{escape(s.target)} ({escape(s.label)})</text>')
    return "\n".join([*parts, "</svg>"])


def png_chart(series: list[Series], path: Path, title: str) -> Path:
    """The same chart as a PNG file (matplotlib, Agg backend: no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4), dpi=100)
    for i, s in enumerate(series):
        color = COLORS[i % len(COLORS)]
        if s.points:
            xs, ys = zip(*s.points, strict=True)
            ax.scatter(xs, ys, color=color, alpha=0.55, s=18)
        if s.intervals:  # 95% intervals of the paired speedups
            ix, lows, highs = zip(*s.intervals, strict=True)
            ax.vlines(ix, lows, highs, color=color, linewidth=1.2)
        bx, by = zip(*s.best, strict=True)
        ax.step(bx, by, where="post", color=color,
                label=f"{s.target} ({s.label})")
    ax.axhline(1.0, color="#bbb", linestyle="--", linewidth=1)
    ax.set(xlabel="iteration (child index in track)", ylabel="speedup over original", title=title)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
