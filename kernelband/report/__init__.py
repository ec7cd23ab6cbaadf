"""Job reports: one self-contained HTML file plus PNG charts, from the database or a server."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kernelband.db import DatabaseError, open_database, session_scope
from kernelband.public_ids import for_session
from kernelband.report.charts import png_chart, speedup_series, svg_chart
from kernelband.report.data import ReportData, ReportError, from_database, from_server
from kernelband.report.html import render_html

__all__ = ["ReportData", "ReportError", "ReportFiles", "from_database", "from_server",
           "render_html", "svg_chart", "write_job_report", "write_report"]


@dataclass(frozen=True)
class ReportFiles:
    """Where a report was written."""

    html: Path
    pngs: tuple[Path, ...]


def write_report(data: ReportData, out_dir: Path) -> ReportFiles:
    """Write job<ID>.html and job<ID>-speedup.png under out_dir."""
    out_dir.mkdir(parents=True, exist_ok=True)
    job_id = data.job["id"]
    html = out_dir / f"job{job_id}.html"
    html.write_text(render_html(data), encoding="utf-8")
    png = png_chart(speedup_series(data), out_dir / f"job{job_id}-speedup.png",
                    f"job {job_id}: speedup over iterations")
    return ReportFiles(html=html, pngs=(png,))


def write_job_report(database_url: str, job_id: int | str, out_dir: Path) -> ReportFiles:
    """Read a job from a database URL and write its report (for `kernelband optimize`);
    `job_id` is the row number or the job's public id (job_...)."""
    try:  # the embedded SQLite file is upgraded like `kernelband serve` does; servers are not
        _, factory = open_database(database_url, migrate=database_url.startswith("sqlite"))
    except DatabaseError as exc:
        raise ReportError(f"cannot open the database: {exc}") from exc
    with session_scope(factory) as session:
        text = str(job_id)
        row = int(text) if text.isdigit() else for_session(session).decode("job", text)
        if row is None:
            raise ReportError(f"{text} is not a job id of this database; pass the id the API "
                              "or `kernelband optimize` printed")
        data = from_database(session, row)
    return write_report(data, out_dir)
