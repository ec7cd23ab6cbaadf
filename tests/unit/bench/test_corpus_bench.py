"""bench/corpus.py: reasons, the acceptance table, and (with the corpus) a real file end to end."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import torch

from bench import corpus_check
from bench.gpu import corpus_gpu

ROOT = Path(__file__).resolve().parents[3]
CORPUS = ROOT.parent / "shared" / "corpus" / "tritonbench-g"
needs_corpus = pytest.mark.skipif(
    not CORPUS.is_dir(), reason=f"corpus not found at {CORPUS} (../shared/corpus from the repo root)")


def test_refusal_reasons_split_load_errors_and_name_the_interpreter() -> None:
    assert corpus_check.refusal_key("wrong_result", "wrong_result: case a") == "wrong_result"
    sandbox = "loading the problem failed in the sandbox (crashed:SIGABRT): killed"
    assert corpus_check.refusal_key("load_error", sandbox) == "load: sandbox crashed:SIGABRT"
    raised = "running test_x() failed: TypeError: bad operand for +; fix the problem file"
    assert corpus_check.refusal_key("load_error", raised) == "load: TypeError: bad operand for +"
    slow = "loading the problem failed in the sandbox: interpreter_timeout: the CPU Triton ..."
    assert corpus_check.refusal_key("load_error", slow) == "interpreter_timeout"


def test_acceptance_table_counts_accepted_and_groups_refusals() -> None:
    rows = [{"file": "a.py", "accepted": True, "reason": "ok", "message": ""},
            {"file": "b.py", "accepted": False, "reason": "interpreter_timeout", "message": "slow"},
            {"file": "c.py", "accepted": False, "reason": "interpreter_timeout", "message": "slow"}]
    text = corpus_check.acceptance_table({"rows": rows, "device": "cpu", "wall_s": 3.0, "workers": 2,
                                    "seeds": 1})
    assert "**1 of 3 accepted**" in text and "| interpreter_timeout | 2 | b, c" in text


def test_gpu_report_renders_suite_metrics() -> None:
    metric = {"target": "h100", "policy": "kernelband", "problems": 2, "correct_pct": 100.0,
              "fast1_pct": 50.0, "geomean_speedup_correct": 1.2, "geomean_speedup_all": 1.2,
              "label": "measured"}
    suite = {"problems": ["p"], "budget": 5, "status": "exit 0", "wall_s": 9.0,
             "report": {"metrics": [metric]}, "output_tail": ""}
    assert "| h100 | kernelband | 2 | 100.0 | 50.0 |" in corpus_gpu.suite_section(suite)


def test_gpu_mode_without_a_gpu_says_so() -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert corpus_gpu.main("h100", ["sin_computation"]) == 2


@needs_corpus
def test_corpus_harness_binds_to_the_kernel_and_times_call_op_only(tmp_path: Path) -> None:
    from kernelband.problem.devices import use_interpreter_for
    from kernelband.problem.tritonbench import runnable_source
    from kernelband.problem.usercode import import_module_file
    from kernelband.profile.perf_harness import harness_prepares, load_harness

    use_interpreter_for("cpu")
    source = (CORPUS / "kernels" / "sin_computation.py").read_text()
    module = import_module_file(runnable_source(source), "original", tmp_path, "cpu")
    harness = load_harness((CORPUS / "perf" / "sin_computation_perf.py").read_text(), module,
                           tmp_path, "test")
    small = [torch.rand(64), torch.rand(100)]  # the real sweep reaches 2**27 elements
    harness.get_input_tensors = lambda: setattr(harness, "input_tensors", small)
    prepares = harness_prepares(harness, "cpu")
    assert [name for name, _ in prepares] == ["perf[0]", "perf[1]"]
    prepares[1][1]()()  # call_op on the prepared input, through the corpus kernel


@needs_corpus
def test_a_corpus_original_is_accepted_through_the_check_path() -> None:
    row = corpus_check.check_one(str(CORPUS / "kernels" / "sin_computation.py"), seeds=1)
    assert row["accepted"], row


def test_gpu_phase_boxes_take_overrides_and_refuse_unknown_phases() -> None:
    from bench.gpu.corpus_gpu import PHASE_S, phase_boxes

    assert phase_boxes("") == PHASE_S
    assert phase_boxes("check=450, suite=0") == {**PHASE_S, "check": 450.0, "suite": 0.0}
    with pytest.raises(SystemExit, match="unknown phase 'chek'"):
        phase_boxes("chek=1")


def test_a_suite_cut_short_by_its_box_still_reports_what_its_database_holds(
        tmp_path: Path) -> None:
    from bench.gpu.corpus_gpu import stored_report
    from kernelband.db import repository
    from kernelband.db.session import open_database, session_scope
    from kernelband.problem.model import Case, KernelProblem
    from kernelband.suite import SuiteSettings, create_suite

    database = tmp_path / "suite.db"
    assert stored_report(database) is None  # nothing stored: no report, not an error
    engine, factory = open_database(f"sqlite:///{database}", migrate=True)
    problems = [KernelProblem(name=f"p{i}", format="native", source=f"# {i}\n", editable="BODY",
                              entry="entry", kernel_names=("k",), cases=(Case("c1", {}),),
                              held_out_cases=())
                for i in range(2)]
    with session_scope(factory) as session:
        team = repository.get_or_create_team(session, "local")
        create_suite(session, team.id, "s", "native", problems, [],
                     SuiteSettings(targets=("h100",), policies=("kernelband",), model="",
                                   budget=5, parallelism=2, seed=0))
    engine.dispose()
    report = stored_report(database)
    assert report is not None
    assert report["jobs_finished"] == 0 and len(report["job_ids"]) == 2
    assert {row["problem"] for row in report["problems"]} == {"p0", "p1"}


def test_a_check_past_its_deadline_starts_nothing_and_says_so(tmp_path: Path) -> None:
    files = [tmp_path / "a.py", tmp_path / "b.py"]
    for path in files:
        path.write_text("# not checked\n")
    rows = corpus_check.check_files(files, workers=1, seeds=1, deadline=time.monotonic() - 1)
    assert [(r["file"], r["reason"]) for r in rows] == [("a.py", "not_run (time box)"),
                                                        ("b.py", "not_run (time box)")]


def test_a_journal_resumes_a_stopped_run_without_checking_its_files_again(tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    done = {"file": "a.py", "accepted": True, "reason": "ok", "message": ""}
    journal.write_text(json.dumps(done) + "\n")
    (tmp_path / "a.py").write_text("# would fail to load if checked again\n")
    assert corpus_check.check_files([tmp_path / "a.py"], 1, 1, journal=journal) == [done]
