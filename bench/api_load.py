"""API load: job-detail, events and fleet polling at fixed request rates against uvicorn.

One command (`python -m bench.api_load`, about a minute): a fresh Postgres database seeded
with a job from real engine steps fed SIMULATED task results (bench/api_server.py), uvicorn
serving the API on it, and this process offering each (mix, rate) in turn with a small
asyncio HTTP client (bench/api_client.py). It prints one JSON line per rate and the verdict,
writes bench/results/api_load.json, and `make bench` turns that into its RESULTS.md section.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import importlib.util
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from bench.api_client import CHANGED_EVERY, CONNECTIONS, MIXES, Target, learn_etags, run_rate
from bench.api_server import (
    SIMULATED_WORKERS,
    CpuMeter,
    backend_pids,
    seed_api_job,
    server_errors,
)
from bench.common import (
    RESULTS_DIR,
    ROOT,
    fmt,
    fresh_postgres,
    load_average,
    markdown_table,
    new_figure,
    percentile_ms,
    save_figure,
    verdict,
)
from bench.processes import process_cpu_s, start_api

TARGET_RPS, TARGET_P99_MS = 500.0, 50.0
SERVER_WORKERS = 1  # uvicorn worker processes
nan = float("nan")

Plan = tuple[tuple[str, float, float], ...]  # (mix, offered req/s, seconds), in this order
PLAN: Plan = (("full", 100.0, 4.0), ("full", 200.0, 4.0), ("dashboard", 250.0, 4.0),
              ("dashboard", TARGET_RPS, 10.0), ("dashboard", 750.0, 4.0))
QUICK_PLAN: Plan = (("full", 50.0, 2.0), ("dashboard", 100.0, 2.0),
                    ("dashboard", TARGET_RPS, 3.0))


def run_async(coro: Any) -> Any:
    """asyncio.run in a thread of its own, so a caller's running event loop does not matter."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def measure(target: Target, rate: float, seconds: float, meter: CpuMeter,
            url: str) -> dict[str, Any]:
    """One rate: latency, throughput, and CPU per answered request of each consumer."""
    load = load_average()
    meter.start()
    row = run_async(run_rate(target, rate, seconds))
    cpu = meter.stop()
    good = row.pop("good_latencies_s")
    served = max(1, len(good))
    row.update({"seconds": seconds, "load_average": load,
                "p50_ms": percentile_ms(good, 50), "p99_ms": percentile_ms(good, 99),
                "max_ms": percentile_ms(good, 100),
                "server_cpu_ms_per_request": 1000 * cpu["server_cpu_s"] / served,
                "postgres_cpu_ms_per_request": 1000 * cpu["postgres_cpu_s"] / served,
                "client_cpu_ms_per_request": 1000 * cpu["client_cpu_s"] / served,
                "machine_busy_pct": cpu["machine_busy_pct"],
                "db_idle_in_transaction_at_end": len(backend_pids(url, "idle in transaction"))})
    return row


def serve_rates(url: str, job: tuple[str, str, int],
                plan: Plan) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Start a server, offer each (mix, rate, seconds) in turn, stop it; rows and errors."""
    with tempfile.TemporaryDirectory() as logs:
        env = {**os.environ, "KERNELBAND_DATABASE_URL": url, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        server, base = start_api(env, Path(logs), ROOT, SERVER_WORKERS)
        rows: list[dict[str, Any]] = []
        try:
            full = Target("127.0.0.1", int(base.rsplit(":", 1)[1]), *job)
            run_async(run_rate(full, 50, 1.0))  # warm-up: connections, caches, token use
            dashboard = learn_etags(full)
            meter = CpuMeter(server.popen.pid, url)
            for mix, rate, seconds in plan:
                rows.append(measure(dashboard if mix == "dashboard" else full, rate, seconds,
                                    meter, url))
                print(json.dumps(rows[-1]), flush=True)
        finally:
            server.stop(timeout_s=10)  # a saturated server may still be draining
        return rows, server_errors(server.log_path)


def run_load(plan: Plan) -> dict[str, Any]:
    """Seed a fresh database and offer each (mix, rate, seconds) of `plan`."""
    with fresh_postgres("kb_bench_api") as url:
        job = seed_api_job(url)
        rows, errors = serve_rates(url, job, plan)
    fast = [m for m in ("httptools", "uvloop") if importlib.util.find_spec(m) is not None]
    return {"events_in_job": job[2], "rows": rows, **errors, "cores": os.cpu_count(),
            "server": f"uvicorn ({', '.join(fast) or 'h11, asyncio'}), {SERVER_WORKERS} worker "
                      "process(es), Postgres",
            "client": f"asyncio HTTP/1.1 client, open loop, {CONNECTIONS} keep-alive connections"}


def target_row(data: dict[str, Any]) -> dict[str, Any] | None:
    """The dashboard mix at the target rate, if it was offered."""
    return next((r for r in data["rows"] if r.get("mix", "full") == "dashboard"
                 and r["offered_rps"] == TARGET_RPS), None)


def target_met(data: dict[str, Any]) -> tuple[bool | None, str]:
    """Dashboard mix at 500 req/s offered: p99 <= 50 ms, no errors and >= 98% of it achieved
    (the rate counts the time to drain the last answers). None when it was not offered."""
    row = target_row(data)
    if row is None:
        return None, "dashboard mix at 500 req/s not run"
    met = (row["p99_ms"] <= TARGET_P99_MS and row["errors"] == 0
           and row["throughput_rps"] >= 0.98 * TARGET_RPS)
    return met, (f"dashboard mix: {fmt(row['throughput_rps'])} req/s achieved of "
                 f"{fmt(TARGET_RPS, 0)} offered, p50 {fmt(row['p50_ms'])} ms, p99 "
                 f"{fmt(row['p99_ms'])} ms, {row['errors']} errors; CPU per request: server "
                 f"{fmt(row.get('server_cpu_ms_per_request', nan), 2)} ms, Postgres "
                 f"{fmt(row.get('postgres_cpu_ms_per_request', nan), 2)} ms, load generator "
                 f"{fmt(row.get('client_cpu_ms_per_request', nan), 2)} ms; load average "
                 f"{row.get('load_average', '?')} before the run")


def _one_minute_load(text: str) -> float:
    """The 1-minute figure of a "1/5/15" load average (0 when unknown)."""
    try:
        return float(text.split("/")[0])
    except ValueError:
        return 0.0


def section(data: dict[str, Any]) -> str:
    """The RESULTS.md section: method, table and plot."""
    rows = [(r.get("mix", "full"), fmt(r["offered_rps"], 0), fmt(r.get("seconds", nan), 0),
             fmt(r["throughput_rps"]),
             f"{100 * r.get('not_modified', 0) / max(1, r['requests']):.0f}%",
             f"{r['errors']} ({r.get('unanswered', 0)})", fmt(r["p50_ms"]),
             fmt(r["p99_ms"]), fmt(r["max_ms"]), fmt(r.get("server_cpu_ms_per_request", nan), 2),
             fmt(r.get("postgres_cpu_ms_per_request", nan), 2),
             fmt(r.get("client_cpu_ms_per_request", nan), 2),
             fmt(r.get("machine_busy_pct", nan), 0), r.get("load_average", "-"))
            for r in data["rows"]]
    table = markdown_table(
        ("mix", "offered req/s", "s", "achieved req/s", "304", "errors (unanswered)", "p50 ms",
         "p99 ms", "max ms", "server CPU ms/req", "Postgres CPU ms/req", "load gen CPU ms/req",
         "machine busy %", "load avg before"), rows)
    table += ("\n\nCPU per answered request, from /proc: the uvicorn process tree, the Postgres "
              "backends serving the benchmark's database, and this process (the load "
              "generator); machine busy % counts every process on the machine during the rate "
              "(other work included). A full answer runs the endpoint (routing, a worker "
              "thread, an ORM session, JSON); an unchanged conditional poll is answered 304 "
              "by services/api/fastpoll.py on the event loop from one prepared query (token "
              "by hash with the job's team and version, or the workers' fingerprint and, "
              "with a broker, Redis queue lengths).")
    stuck = max((r.get("db_idle_in_transaction_at_end") or 0 for r in data["rows"]), default=0)
    if stuck:
        table += (f"\n\nAt the end of a rate up to {stuck} database connection(s) were idle in "
                  "a transaction (a snapshot: a request between its queries holds one "
                  "briefly).")
    if data.get("server_tracebacks"):
        table += (f"\n\nThe server logged {data['server_tracebacks']} tracebacks; the first "
                  f"error: `{data['first_server_error'][:200]}`.")
    row = target_row(data)
    busy_before = _one_minute_load(row.get("load_average", "")) if row else 0.0
    if row and busy_before > (data.get("cores") or 2):
        table += (f"\n\nThe machine was not quiet: a load average of {busy_before:.1f} on "
                  f"{data.get('cores')} cores when the target rate started, and the machine "
                  f"{fmt(row.get('machine_busy_pct', nan), 0)}% busy during it (this benchmark "
                  "included). Latencies then measure the competition for the cores as much as "
                  "the service; the CPU per request is the steadier number.")
    met, why = target_met(data)
    word = "not evaluated" if met is None else verdict(met)
    return (f"## API load\n\nCommand: `python -m bench.api_load`. {data['server']}; load "
            f"generator: {data['client']} in the benchmark process; client, server and "
            f"Postgres share this machine's {data.get('cores', '?')} cores. Latency counts "
            f"from the scheduled send time. Mix `full`: half `GET /v1/jobs/{{id}}` and half "
            f"`GET /v1/jobs/{{id}}/events?after=N` with 1-10 new events, no ETag (every "
            f"answer is built in full). Mix `dashboard`: what open dashboards send, per 10 "
            f"requests 5 events polls after the last event, 3 job details and 2 fleet views "
            f"({SIMULATED_WORKERS} SIMULATED worker rows); 1 in {CHANGED_EVERY} finds a change "
            f"(sent without a current ETag: full answer), the others send the ETag of their "
            f"last answer and find none (304). The job's {data['events_in_job']} events came "
            f"from engine steps fed simulated task results.\n\n{table}\n\nTarget >= 500 "
            f"req/s at p99 <= 50 ms on the dashboard mix, load generator included: "
            f"**{word}** ({why}).\n\n![api load](results/api_load.png)")


def plot(data: dict[str, Any]) -> None:
    """p50/p99 latency against the offered rate, one line per mix."""
    fig, (ax,) = new_figure()
    for mix in MIXES:
        rows = [r for r in data["rows"] if r.get("mix", "full") == mix]
        rates = [r["offered_rps"] for r in rows]
        if rows:
            ax.plot(rates, [r["p50_ms"] for r in rows], "o-", label=f"{mix} p50")
            ax.plot(rates, [r["p99_ms"] for r in rows], "s-", label=f"{mix} p99")
    ax.axhline(TARGET_P99_MS, ls="--", c="grey", label="p99 target")
    ax.set_xlabel("offered requests/s")
    ax.set_ylabel("latency ms (log)")
    ax.set_yscale("log")
    ax.legend()
    ax.set_title("API polling latency (uvicorn + Postgres)")
    save_figure(fig, "api_load.png")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command line: the default plan (about a minute) or --quick (about 20 s)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer, shorter rates")
    args = parser.parse_args(argv)
    data = run_load(QUICK_PLAN if args.quick else PLAN)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (RESULTS_DIR / "api_load.json").write_text(json.dumps(data, indent=2))
    met, why = target_met(data)
    print(f"api load target >= {TARGET_RPS:.0f} req/s at p99 <= {TARGET_P99_MS:.0f} ms: "
          f"{'not evaluated' if met is None else verdict(met)} ({why})", flush=True)
    return data


__all__ = ["PLAN", "QUICK_PLAN", "main", "plot", "process_cpu_s", "run_load", "section",
           "target_met"]


if __name__ == "__main__":
    main()
