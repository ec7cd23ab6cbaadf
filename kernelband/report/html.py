"""One self-contained HTML report: inline CSS and SVG, no scripts, no external references."""

from __future__ import annotations

import difflib
from html import escape
from typing import Any

from kernelband.report.charts import speedup_series, svg_chart
from kernelband.report.data import ReportData
from kernelband.speedups import NOT_MEASURED

CSS = """body{font-family:system-ui,sans-serif;margin:1.5rem;color:#1d2330}
table{border-collapse:collapse;margin:.5rem 0 1rem;font-size:.88rem}
th,td{border-bottom:1px solid #dde2ea;padding:.25rem .6rem;text-align:left}th{background:#eef1f6}
.measured{background:#d7f5dd}.estimated{background:#fff0c7}.label{font-size:.72rem;padding:0 .3rem}
pre{background:#fff;border:1px solid #dde2ea;padding:.4rem;font-size:.8rem;overflow-x:auto}
.add{background:#e3f9e5}.del{background:#fde8e8}"""


def _cell(value: Any) -> str:
    return f"<td>{escape('-' if value is None else str(value))}</td>"


def _label(name: str | None) -> str:
    return f' <span class="label {escape(name or "")}">{escape(name or "unlabelled")}</span>' if name else ""


def _num(value: float | None, fmt: str = ".4g") -> str:
    return "-" if value is None else format(value, fmt)


def _speedup_text(row: dict[str, Any]) -> str:
    """`1.18x [1.12, 1.24]`, `..., no significant speedup`, `1.30x estimated`, `not measured`."""
    return str(row.get("speedup_text") or NOT_MEASURED)


def _table(headers: list[str], rows: list[str]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _tracks(job: dict[str, Any]) -> str:
    rows = []
    for t in job["tracks"]:
        b = t.get("best") or {}
        lab = _label(b.get("label"))
        speed = escape(_speedup_text(b)) if b else "-"
        if b.get("speedup_final"):
            speed += " <small>(final re-measure)</small>"
        progress = f"{t.get('iterations_done', 0)} / {job['budget']['iterations']}"
        rows.append(f"<tr>{_cell(t['target'])}{_cell(t['status'])}{_cell(progress)}"
                    f"<td>{_num(t.get('original_time_ms'))}{lab}</td><td>{_num(b.get('time_ms'))}{lab}</td>"
                    f"<td>{speed}{lab}</td>{_cell(b.get('device'))}{_cell(t.get('held_out'))}"
                    f"{_cell(t.get('reason'))}</tr>")
    return _table(["target", "status", "iterations", "original ms", "best ms", "best speedup",
                   "device", "held-out", "reason"], rows)


def _arms(arms: dict[str, list[dict[str, Any]]]) -> str:
    parts = []
    for target, rows in arms.items():
        body = [f"<tr>{_cell(a['cluster'])}{_cell(a['strategy'])}{_cell(_num(a['pulls']))}"
                f"{_cell(_num(a['mean_reward'], '.3f'))}{_cell('masked' if a['masked'] else 'open')}"
                f"{_cell(_num(a['ucb_score'], '.3f'))}</tr>" for a in rows]
        parts.append(f"<h3>{escape(target)}</h3>" + (_table(
            ["cluster", "strategy", "pulls", "mean reward", "mask", "UCB score"], body)
            if body else "<p>no arm statistics</p>"))
    return "".join(parts)


def _candidates(candidates: list[dict[str, Any]]) -> str:
    rows = []
    for c in candidates:
        own = [m for m in c["measurements"] if m["target"] == c["target"]]
        m = own[-1] if own else None
        time = f"<td>{_num(m['time_ms'])}{_label(m['label'])}</td>" if m else "<td>-</td>"
        speed = f"<td>{escape(_speedup_text(m))}{_label(m['label'])}</td>" if m else "<td>-</td>"
        strategy = c["strategy"] or ("free" if c["lineage_depth"] else "original")
        rows.append(f"<tr>{_cell(c['id'])}{_cell(c['target'])}{_cell(c['parent_id'])}"
                    f"{_cell(c['lineage_depth'])}{_cell(strategy)}{_cell(c['status'])}"
                    f"{_cell(c['reason'])}{time}{speed}</tr>")
    return _table(["id", "target", "parent", "depth", "strategy", "status", "reason",
                   "time ms", "speedup"], rows)


def _diffs(data: ReportData) -> str:
    parts = []
    for t in data.job["tracks"]:
        best = (t.get("best") or {}).get("candidate_id")
        original = next((c["id"] for c in data.candidates
                         if c["target"] == t["target"] and c["lineage_depth"] == 0), None)
        if best is None or best == original or best not in data.sources or original not in data.sources:
            continue
        lines = difflib.unified_diff(data.sources[original].splitlines(),
                                     data.sources[best].splitlines(), "original", f"candidate {best}",
                                     lineterm="")
        body = "\n".join(f'<span class="{"add" if x.startswith("+") else "del" if x.startswith("-") else ""}">'
                         f"{escape(x)}</span>" for x in lines)
        parts.append(f"<h3>{escape(t['target'])}: candidate {best}</h3><pre>{body}</pre>")
    return "".join(parts) or "<p>No best kernel differs from the original (or sources are not available from a server).</p>"


def render_html(data: ReportData) -> str:
    """The whole report as one HTML document."""
    job, spend = data.job, data.job["spend"]
    usd = f"${spend['usd']:.4f}" + ("" if spend.get("usd_known", True) else " (some prices unknown)")
    title = f"KernelBand job {job['id']}: {job['problem']['name']}"
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>
<style>{CSS}</style></head><body>
<h1>{escape(title)}</h1>
<p>Status <b>{escape(job['status'])}</b> · policy {escape(job['policy'])} · generator
{escape(job.get('model') or job.get('generator') or 'rules')} · spend {spend.get('iterations', 0)} iterations,
{spend['tokens']} tokens, {escape(usd)}{' · ' + escape(job['reason']) if job.get('reason') else ''}</p>
<p>Every time and speedup is labelled <span class="label measured">measured</span> (timed on the named GPU)
or <span class="label estimated">estimated</span> (CPU cost model for the target). A measured speedup is paired
(the candidate and the original interleaved in one session) and shown with its 95% interval, e.g.
1.18x [1.12, 1.24]; "no significant speedup" means the interval contains 1.0; "not measured" means no paired
measurement exists. Estimates have no interval.</p>
<h2>Tracks</h2>{_tracks(job)}
<h2>Speedup over iterations</h2>{svg_chart(speedup_series(data))}
<h2>Bandit arms (cluster × strategy)</h2>{_arms(data.arms)}
<h2>Best kernel vs original</h2>{_diffs(data)}
<h2>Candidates (lineage)</h2>{_candidates(data.candidates)}
</body></html>
"""
