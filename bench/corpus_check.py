"""Corpus files through the `check` command's code path, several at once, and the acceptance
table of the rows. Shared by the CPU corpus benchmark (bench/corpus.py) and its GPU run
(bench/gpu/corpus_gpu.py).
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter, defaultdict
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from bench.common import markdown_table
from kernelband.commands.check import check_problem_source
from kernelband.config import get_settings
from kernelband.sandbox.device import detect_device

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
TRITONBENCH = CORPUS / "tritonbench-g" / "kernels"
ABANDON_S = 120.0  # checks still running this long after the deadline are given up

def corpus_files(folder: Path = TRITONBENCH, only: list[str] | None = None) -> list[Path]:
    """The corpus's problem files, sorted (restricted to the stems in `only` when given)."""
    files = sorted(folder.glob("*.py"))
    return [f for f in files if not only or f.stem in only]


def short_line(text: str, limit: int = 160) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


_INTERPRETER = re.compile(r"\b(interpreter_[a-z]+):")
_SANDBOX = re.compile(r"failed in the sandbox \(([^)]*)\)")
_RAISED = re.compile(r"failed: (\w+(?:Error|Exception|Interrupt)?): (.*)")


def refusal_key(reason: str, message: str) -> str:
    """The table's reason: the verdict reason, load errors split by what failed."""
    if found := _INTERPRETER.search(message):
        return found.group(1)
    if reason != "load_error":
        return reason
    if found := _SANDBOX.search(message):
        return f"load: sandbox {found.group(1)}"
    if found := _RAISED.search(message):
        words = " ".join(found.group(2).split(";")[0].split()[:6]).rstrip(".,;:")
        return f"load: {found.group(1)}: {words}"
    return "load: " + " ".join(message.split()[:6])


def check_one(path: str, fmt: str = "tritonbench", seeds: int = 3) -> dict[str, Any]:
    """One file through the `check` command's code path; a row of the acceptance table."""
    start = time.perf_counter()
    source = Path(path).read_text(encoding="utf-8")
    outcome = check_problem_source(source, fmt, Path(path).stem, seeds=seeds)
    row: dict[str, Any] = {"file": Path(path).name, "wall_s": round(time.perf_counter() - start, 1)}
    if detect_device() == "cpu":
        row["interpret_budget_s"] = get_settings().sandbox_interpret_timeout_s
    if outcome.verdict is None:
        message = short_line(outcome.load_error, 300)
        return row | {"accepted": False, "reason": refusal_key("load_error", message),
                      "message": message}
    verdict = outcome.verdict
    row |= {"accepted": verdict.correct, "reason": verdict.reason, "message": short_line(verdict.message)}
    row["flags"] = list(verdict.flags)
    details = verdict.details
    for key in ("load_s", "run_s", "sandbox_wall_s", "spread", "compile_s"):
        if key in details and isinstance(details[key], int | float):
            row[key] = round(float(details[key]), 3)
    return row


def check_files(files: list[Path], workers: int, seeds: int, deadline: float | None = None,
                journal: Path | None = None) -> list[dict[str, Any]]:
    """Check `files` with `workers` processes, the largest first (many autotune configs start
    while others wait); rows sorted by file name. Rows are appended to `journal` as they finish
    and files already in it are not checked again. With a `deadline` (time.monotonic()) nothing
    starts after it, checks still running ABANDON_S later are given up (their processes
    terminated), and the files not finished are rows that say so."""
    rows = [json.loads(line) for line in journal.read_text().splitlines()
            if line.strip()] if journal is not None and journal.exists() else []
    seen = {r["file"] for r in rows}
    queue = sorted((f for f in files if f.name not in seen), key=lambda f: -f.stat().st_size)
    pending: dict[Future[dict[str, Any]], str] = {}
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn"))
    try:
        while queue or pending:
            while queue and len(pending) < workers and (deadline is None
                                                        or time.monotonic() < deadline):
                path = queue.pop(0)
                pending[pool.submit(check_one, str(path), "tritonbench", seeds)] = path.name
            if not pending:
                break
            timeout = None if deadline is None else max(1.0, deadline + ABANDON_S
                                                         - time.monotonic())
            finished, _ = wait(set(pending), timeout=timeout, return_when=FIRST_COMPLETED)
            if not finished:
                break
            for future in finished:
                rows.append(_row(future, pending.pop(future)))
                if journal is not None:
                    with journal.open("a") as out:
                        out.write(json.dumps(rows[-1]) + "\n")
                mark = "ok " if rows[-1]["accepted"] else "REF"
                print(f"[{len(rows)}/{len(files)}] {mark} {rows[-1]['file']}: "
                      f"{rows[-1]['reason']} {rows[-1]['message'][:110]}", flush=True)
    finally:
        for process in list(getattr(pool, "_processes", {}).values()):
            process.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
    rows += [{"file": name, "accepted": False, "message": "",
              "reason": "not_finished (still running when the time box ended)"}
             for name in pending.values()]
    rows += [{"file": f.name, "accepted": False, "message": "", "reason": "not_run (time box)"}
             for f in queue]
    return sorted(rows, key=lambda r: r["file"])


def _row(future: Future[dict[str, Any]], name: str) -> dict[str, Any]:
    """The check's row; a crash of the check itself is a row, not an abort."""
    try:
        return future.result()
    except Exception as exc:  # noqa: BLE001
        return {"file": name, "accepted": False, "reason": "bench_error",
                "message": short_line(f"{type(exc).__name__}: {exc}")}


def refusal_groups(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Refused rows grouped by reason, the largest group first."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        if not row["accepted"]:
            groups[row["reason"]].append(row)
    return dict(sorted(groups.items(), key=lambda item: (-len(item[1]), item[0])))


def acceptance_table(data: dict[str, Any]) -> str:
    """Markdown: accepted count, then each refusal reason with its count and files."""
    rows = data["rows"]
    accepted = sum(1 for r in rows if r["accepted"])
    budgets = Counter(r["interpret_budget_s"] for r in rows if "interpret_budget_s" in r)
    budget = ("; interpreter budget per sandboxed run: " + ", ".join(
        f"{b:.0f} s for {n} files" for b, n in sorted(budgets.items()))) if budgets else ""
    wall = f"{data['wall_s']:.0f} s" + (f" ({data['wall_note']})" if data.get("wall_note") else "")
    lines = [f"**{accepted} of {len(rows)} accepted** on {data['device']} "
             f"(wall time {wall}, {data['workers']} processes, "
             f"{data['seeds']} seeds per case, held-out cases included{budget}).", "",
             markdown_table(("reason", "count", "files (first message)"), [
                 (reason, len(group), ", ".join(r["file"].removesuffix(".py") for r in group)
                  + f" <br> e.g. {group[0]['message'][:200]}")
                 for reason, group in refusal_groups(rows).items()])]
    return "\n".join(lines)
