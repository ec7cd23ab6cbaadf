"""Shared benchmark helpers: machine facts, percentiles, a fresh Postgres database, RESULTS.md sections."""

from __future__ import annotations

import os
import platform
import re
import subprocess
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.engine import make_url

from kernelband.db.session import make_engine, normalize_url, upgrade_database

ROOT = Path(__file__).resolve().parents[1]
RESULTS_MD = ROOT / "bench" / "RESULTS.md"
RESULTS_DIR = ROOT / "bench" / "results"
ADMIN_URL = os.environ.get("KERNELBAND_BENCH_POSTGRES_URL",
                           "postgresql://postgres@127.0.0.1:5432/postgres")


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (platform's guess elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_gib() -> float:
    """Total physical memory in GiB (0 when unknown)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024**3
    except (ValueError, OSError):
        return 0.0


def load_average() -> str:
    """1/5/15-minute load average: this machine is shared, so numbers depend on it."""
    try:
        return "/".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


REFERENCE_LOOP = 1_000_000  # integer additions of `python_reference_ms`


def python_reference_ms(repeats: int = 5, additions: int = REFERENCE_LOOP) -> float:
    """Milliseconds one core takes for a fixed pure-Python loop (best of `repeats`).

    The scheduler's work is mostly Python on one core, and the machines these benchmarks run
    on differ from day to day (the same code has measured 2.5 times apart); this figure lets
    two runs' rates be compared with the speed of the machine they ran on in mind."""
    best = float("inf")
    for _ in range(repeats):
        start, total = time.perf_counter(), 0
        for i in range(additions):
            total += i
        best = min(best, time.perf_counter() - start)
    return 1000 * best


def commit() -> str:
    """The checkout's commit, and whether code the benchmarks run differs from it."""
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                                  timeout=10, check=False).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""

    sha = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "kernelband", "services",
                "bench/*.py", "bench/gpu/*.py")
    return sha + (" with uncommitted changes" if dirty else "")


def machine_line() -> str:
    """One Markdown line naming the machine, its speed, its load, the time and the commit."""
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (f"Machine: {cpu_model()}, {os.cpu_count()} cores, {memory_gib():.0f} GiB RAM, "
            f"{platform.system()} {platform.machine()}, Python {platform.python_version()}; "
            f"Python reference loop ({REFERENCE_LOOP:,} integer additions, best of 5) "
            f"{python_reference_ms():.0f} ms; load average {load_average()} (1/5/15 min) "
            f"at {now}; commit {commit()}.")


def percentile_ms(seconds: Sequence[float], q: float) -> float:
    """The q-th percentile of durations in seconds, in milliseconds (nan when empty)."""
    if not seconds:
        return float("nan")
    return float(np.percentile(np.asarray(seconds), q) * 1000.0)


@contextmanager
def fresh_postgres(prefix: str = "kb_bench") -> Iterator[str]:
    """A new, migrated Postgres database for one benchmark, dropped afterwards."""
    admin = make_engine(ADMIN_URL, isolation_level="AUTOCOMMIT")
    name = f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as exc:
        admin.dispose()
        raise SystemExit(f"Postgres is unreachable at {ADMIN_URL} ({type(exc).__name__}: {exc}); "
                         "start it or set KERNELBAND_BENCH_POSTGRES_URL to a server where this "
                         "user may CREATE DATABASE.") from exc
    url = make_url(normalize_url(ADMIN_URL)).set(database=name).render_as_string(
        hide_password=False)
    try:
        upgrade_database(url)
        yield url
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def markers(name: str) -> tuple[str, str]:
    """The HTML comments delimiting benchmark `name`'s section of RESULTS.md."""
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


def write_section(name: str, body: str, results_md: Path = RESULTS_MD, at_top: bool = False) -> None:
    """Replace (or add, appended or under the title) one delimited section; the rest stays."""
    begin, end = markers(name)
    section = f"{begin}\n{body.strip()}\n{end}"
    content = results_md.read_text() if results_md.exists() else "# Benchmark results\n"
    if begin in content and end in content:
        content = re.sub(re.escape(begin) + r".*?" + re.escape(end), lambda _: section, content,
                         flags=re.S)
    elif at_top:
        title, _, rest = content.partition("\n")
        content = f"{title}\n\n{section}\n\n{rest.lstrip(chr(10))}"
    else:
        content = content.rstrip("\n") + "\n\n" + section + "\n"
    results_md.write_text(content)
    if name != INDEX:
        write_section(INDEX, provenance_index(results_md), results_md, at_top=True)


INDEX = "index"
_SECTION = re.compile(r"<!-- ([\w-]+):begin -->\n(.*?)\n<!-- \1:end -->", re.S)


def provenance_index(results_md: Path) -> str:
    """A table of the page's sections: when, on which machine and at which commit each ran.

    Date, machine and commit come from the section's own machine line. A section that names no
    commit (written before machine lines did) gets the last commit that changed it; one without
    a date or machine gets those of the Run section written in the same commit (one `make
    bench`), else the commit's date."""
    content, rows, run = results_md.read_text(), [], ("-", "-", "")
    for match in _SECTION.finditer(content):
        name, body = match.group(1), match.group(2)
        if name == INDEX:
            continue
        first = content[:match.start()].count("\n") + 2
        sha, day = _last_commit(results_md, first, first + body.count("\n"))
        date = re.search(r"\d{4}-\d{2}-\d{2}(?: \d{2}:\d{2} UTC)?", body)
        machine = re.search(r"Machine: ([^,]+, \d+ cores)", body)
        named = re.search(r"; commit ([0-9a-f]{7,}(?: with uncommitted changes)?)[.\s]", body)
        if name == "bench-run":
            run = (date.group(0) if date else "-", machine.group(1) if machine else "-", sha)
        same_run = sha == run[2] and sha not in ("unknown", "not committed yet")
        title = next((ln[3:] for ln in body.splitlines() if ln.startswith("## ")), name)
        rows.append((title,
                     date.group(0) if date else (run[0] if same_run else day),
                     machine.group(1) if machine else (run[1] if same_run else "-"),
                     named.group(1) if named else sha))
    return ("## Sections\n\nThe CPU benchmarks (`make bench`, bench/scenarios.py); the GPU families "
            "have their own pages: bench/gpu/RESULTS.md (timing), bench/gpu/RESULTS-corpus.md, "
            "bench/gpu/RESULTS-fleet.md. Date and machine are the section's own; commit is the "
            "one its machine line names, else the last commit that changed the section.\n\n"
            + markdown_table(("section", "date", "machine", "commit"), rows))


def _last_commit(path: Path, first: int, last: int) -> tuple[str, str]:
    """The newest commit among lines first..last of `path` (git blame) and its date."""
    try:
        done = subprocess.run(["git", "blame", "--line-porcelain", "-L", f"{first},{last}", "--",
                               str(path)], cwd=ROOT, capture_output=True, text=True, timeout=30,
                              check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown", "-"
    newest, sha, current = 0, "unknown", ""
    for line in done.stdout.splitlines():
        if re.match(r"[0-9a-f]{40} \d+ \d+", line):
            current = line[:7]
        elif line.startswith("author-time ") and int(line.split()[1]) >= newest:
            newest, sha = int(line.split()[1]), current
    day = f"{datetime.fromtimestamp(newest, UTC).date().isoformat()} (committed)" if newest else "-"
    return ("not committed yet" if sha == "0000000" else sha), day


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table from a header and rows of printable cells."""
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def verdict(met: bool) -> str:
    """The word a results table uses for a target."""
    return "met" if met else "NOT met"


def fmt(value: float | None, digits: int = 1) -> str:
    """A number for a table; `-` for None or nan."""
    return "-" if value is None or value != value else f"{value:,.{digits}f}"


def save_figure(fig: Any, name: str) -> Path:
    """Write a matplotlib figure under bench/results/ and close it."""
    import matplotlib.pyplot as plt

    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / name
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def new_figure(columns: int = 1) -> tuple[Any, Any]:
    """A headless matplotlib figure with `columns` axes side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, columns, figsize=(5.5 * columns, 4), squeeze=False)
    return fig, axes[0]
