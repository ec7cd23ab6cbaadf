"""The generation loop with and without repair turns and duplicate detection (SIMULATED model).

The scripted OpenAI-compatible server answers like a weak model: a share of first replies is
broken (a syntax error or a wrong result), a share repeats an earlier answer reformatted, and a
repair turn fixes a given share of broken replies. Everything after the reply is real: the
LLM generator over HTTP, static checks, the interpreter correctness check and the labelled cpu
estimate, on examples/vector_add.py. Each configuration gets the same first replies.

    python -m bench.generation_loop [--quick]
"""

from __future__ import annotations

import json
import os
import random
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from bench.common import RESULTS_DIR, fmt, machine_line, markdown_table, write_section
from kernelband.config import Settings, get_settings
from kernelband.db import open_database, repository, session_scope
from kernelband.db.models import Attempt, Candidate, Job
from kernelband.problem.model import KernelProblem
from kernelband.sandbox import load_problem_sandboxed
from kernelband.scheduling import tasks
from kernelband.scheduling.dispatch import InlineDispatcher
from kernelband.scheduling.lifecycle import job_is_finished
from kernelband.scheduling.pipeline import EngineContext, step
from kernelband.scheduling.stages import stage_times

SIMULATED = "SIMULATED model (scripted weak-model replies); evaluation real (cpu interpreter)"
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "vector_add.py"
BROKEN_SHARE, FIX_SHARE, REPEAT_SHARE, REPLY_DELAY_S = 0.4, 0.6, 0.25, 0.2
CONFIGS = (("no repair, no dedupe", 0, False), ("dedupe only", 0, True),
           ("repair only (R=1)", 1, False), ("repair + dedupe", 1, True))
JSON_OUT = RESULTS_DIR / "generation_loop.json"


def variant(problem: KernelProblem, block: int, warps: int, bug: str = "") -> str:
    """A correct rewrite of vector_add (another block size / warps), or a broken one."""
    code = problem.editable.replace("BLOCK_SIZE = 64", f"BLOCK_SIZE = {block}")
    code = code.replace("num_warps=4", f"num_warps={warps}")
    if bug == "syntax":
        return code.replace("-> torch.Tensor:\n", "-> torch.Tensor\n", 1)
    if bug == "wrong":
        return code.replace("x + y, mask=mask", "x - y, mask=mask")
    return code


def _reply(code: str, note: str = "") -> dict[str, Any]:
    return {"text": f"{note or 'Here is a faster version.'}\n\n```python\n{code}```\n",
            "delay_s": REPLY_DELAY_S}


def weak_model_script(root: Path, problem: KernelProblem, pulls: int, seed: int) -> None:
    """First replies and repair replies of a weak model, seeded (the same for every config)."""
    rng = random.Random(seed)
    shapes = [(b, w) for b in (32, 128, 256, 512, 1024) for w in (1, 2, 8)]
    rng.shuffle(shapes)
    first: list[dict[str, Any]] = []
    repairs: list[dict[str, Any]] = []  # one per broken first reply, in order (R=1, one pull at a time)
    emitted: list[str] = []
    for _ in range(pulls):
        block, warps = shapes[len(first) % len(shapes)]
        if rng.random() < BROKEN_SHARE:
            first.append(_reply(variant(problem, block, warps, rng.choice(("syntax", "wrong")))))
            fixed = rng.random() < FIX_SHARE  # the repair fixes this reply, or breaks it again
            repairs.append(_reply(variant(problem, block, warps, "" if fixed else "syntax"),
                                  "Fixed." if fixed else "Fixed?"))
        elif emitted and rng.random() < REPEAT_SHARE:  # the same program, reformatted
            first.append(_reply(rng.choice(emitted).replace("n = x.numel()",
                                                            "n = x.numel()  # elements")))
        else:
            emitted.append(variant(problem, block, warps))
            first.append(_reply(emitted[-1]))
    folder = root / "vector_add"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "default.json").write_text(json.dumps({"sequence": first}))
    (folder / "default.repair.json").write_text(
        json.dumps({"sequence": repairs or [_reply(variant(problem, 32, 1))]}))


@contextmanager
def scripted_server(root: Path) -> Iterator[str]:
    """The scripted server in a thread; the worker settings point the LLM generator at it."""
    import uvicorn

    from kernelband.generate.fake_server import create_app

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(create_app(root), host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    base = f"http://127.0.0.1:{port}/v1"
    os.environ.update(KERNELBAND_LLM_API_BASE=base, KERNELBAND_LLM_API_KEY="sk-bench-local",
                      KERNELBAND_LLM_MAX_RETRIES="0")
    get_settings.cache_clear()
    tasks._generator.cache_clear()
    try:
        yield base
    finally:
        server.should_exit = True
        thread.join(10)


def run_config(problem: KernelProblem, pulls: int, repair_turns: int, dedupe: bool,
               seed: int = 3) -> dict[str, Any]:
    """One job of `pulls` pulls against a fresh script; its loop metrics."""
    with tempfile.TemporaryDirectory() as tmp:
        weak_model_script(Path(tmp) / "script", problem, pulls, seed)
        engine, factory = open_database(f"sqlite:///{tmp}/loop.sqlite", migrate=True)
        with session_scope(factory) as session:
            team = repository.get_or_create_team(session, "bench")
            row = repository.get_or_create_problem(session, team.id, problem.name, "native",
                                                   problem.source, problem.to_dict(),
                                                   problem.content_hash)
            job_id = repository.create_job(
                session, team.id, row.id, ("cpu",), generator="llm", model="openai/kb-weak",
                budget_iterations=pulls, parallelism=1, seed=seed, repair_turns=repair_turns,
                dedupe=dedupe).id
        with scripted_server(Path(tmp) / "script"):
            started = time.perf_counter()
            functions = {"generate": tasks.generate, "compile": tasks.compile,
                         "profile": tasks.profile, "verify": tasks.verify}
            ctx = EngineContext(factory, InlineDispatcher(functions), Settings())
            while not job_is_finished(factory, job_id):
                step(ctx)
            wall = time.perf_counter() - started
        row_out = _metrics(factory, job_id, wall)
        with session_scope(factory) as session:
            row_out["stages"] = {s.kind: round(s.work_total_s, 2)
                                 for s in stage_times(session, job_id)}
        engine.dispose()
    return row_out


def _metrics(factory: Any, job_id: int, wall_s: float) -> dict[str, Any]:
    with session_scope(factory) as session:
        job = session.get_one(Job, job_id)
        track = repository.job_tracks(session, job_id)[0]
        children = select(Candidate).where(Candidate.track_id == track.id,
                                           Candidate.id != track.original_candidate_id)
        rows = list(session.scalars(children))
        status = [c.status for c in rows]
        distinct = {c.source_hash for c in rows if c.status == "measured"}
        turns = session.scalars(select(Attempt.payload).where(
            Attempt.job_id == job_id, Attempt.kind == "generate")).all()
        evaluations = session.scalar(select(func.count(Attempt.id)).where(
            Attempt.job_id == job_id, Attempt.kind.in_(("compile", "profile")),
            Attempt.decision_id.is_not(None))) or 0
        accepted = len(distinct)  # a repeat evaluated again is no new child
        pulls = track.iterations_done
        return {"pulls": pulls, "replies": len(turns),
                "repair_turns_sent": sum(1 for p in turns if int(p.get("turn") or 0) > 0),
                "accepted": accepted, "measured": status.count("measured"),
                "duplicates": status.count("duplicate"),
                "evaluations": int(evaluations), "tokens": job.tokens_used, "wall_s": wall_s,
                "correct_rate": accepted / pulls if pulls else 0.0,
                "tokens_per_accepted": job.tokens_used / accepted if accepted else float("nan"),
                "wall_per_accepted_s": wall_s / accepted if accepted else float("nan"),
                "best_speedup": track.best_speedup}


def main(quick: list[str] | bool = False) -> dict[str, Any]:
    """Run every configuration; returns the data `section` renders (also saved as JSON)."""
    pulls = 8 if quick else 20
    problem = load_problem_sandboxed(EXAMPLE.read_text(), "native", "vector_add")
    rows = []
    for name, repair_turns, dedupe in CONFIGS:
        row = run_config(problem, pulls, repair_turns, dedupe)
        rows.append({"config": name, "repair_turns": repair_turns, "dedupe": dedupe, **row})
        print(f"{name}: {row['accepted']}/{row['pulls']} accepted, {row['tokens']} tokens, "
              f"{row['wall_s']:.1f} s", flush=True)
    data = {"label": SIMULATED, "pulls": pulls, "broken_share": BROKEN_SHARE,
            "fix_share": FIX_SHARE, "repeat_share": REPEAT_SHARE,
            "reply_delay_s": REPLY_DELAY_S, "machine": machine_line(), "rows": rows}
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    JSON_OUT.write_text(json.dumps(data, indent=2))
    return data


def section(data: dict[str, Any]) -> str:
    """The RESULTS.md section: one row per configuration."""
    rows = [(r["config"], r["pulls"], r["replies"], r["repair_turns_sent"], r["measured"],
             r["accepted"],
             f"{100 * r['correct_rate']:.0f}%", r["duplicates"], r["evaluations"], r["tokens"],
             fmt(r["tokens_per_accepted"], 0), fmt(r["wall_s"], 1),
             fmt(r["wall_per_accepted_s"], 2)) for r in data["rows"]]
    return ("## Generation loop: repair turns and duplicate detection (SIMULATED model)\n\n"
            f"Command: `python -m bench.generation_loop`. {data['label']}. The scripted server "
            f"answers like a weak model: {100 * data['broken_share']:.0f}% of first replies "
            f"broken (syntax error or wrong result), {100 * data['repeat_share']:.0f}% of the "
            "others repeat an earlier answer reformatted, a repair turn fixes "
            f"{100 * data['fix_share']:.0f}% of broken replies; each reply takes "
            f"{data['reply_delay_s']} s (simulated model latency); tokens are the server's "
            "simulated usage (1 token per 4 characters). Every configuration gets the same first "
            f"replies; {data['pulls']} pulls each, parallelism 1, target cpu (interpreter check "
            "and cost-model estimate). Measured = children that passed and were measured; accepted = "
            "the distinct ones among them (normalised source), so a repeat evaluated again counts "
            "once; correct-child rate = accepted / pulls; evaluations = compile and profile "
            "attempts of children.\n\n" + data["machine"]
            + "\n\n" + markdown_table(
                ("config", "pulls", "replies", "repair turns", "measured", "accepted",
                 "correct-child rate",
                 "duplicates", "evaluations", "tokens", "tokens / accepted", "wall s",
                 "wall s / accepted"), rows))


if __name__ == "__main__":
    import sys

    write_section("generation-loop", section(main("--quick" in sys.argv)))
    print("bench/RESULTS.md: generation-loop section updated")
