"""Suite exports carry the original and best times per case, with their label and method."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime

from kernelband.suite import LoadFailure, SuiteReport, SuiteSettings, to_csv, to_json
from kernelband.suite.metrics import ProblemResult, suite_metrics


def _report() -> SuiteReport:
    timed = ProblemResult("add", "kernelband", "h100", 1, "completed", True, 2.0, "measured",
                          "passed", None, original_ms=4.0, best_ms=2.0,
                          original_case_ms={"perf[0]": 1.0, "perf[1]": 3.0},
                          best_case_ms={"perf[0]": 0.5, "perf[1]": 1.5},
                          method="measured: perf harness, call_op alone on NVIDIA H100",
                          speedup_low=1.9, speedup_high=2.1, speedup_method="bootstrap 95%")
    refused = ProblemResult("mul", "kernelband", "h100", 2, "failed", False, None, None, None,
                            "original rejected: wrong_result")
    rows = (timed, refused)
    return SuiteReport("suite-x", "corpus", "tritonbench", SuiteSettings(targets=("h100",)),
                       datetime.now(UTC), (1, 2), 2, tuple(suite_metrics(rows)), rows,
                       (LoadFailure("pow", "interpreter_crash: the CPU Triton interpreter ..."),))


def test_csv_rows_hold_times_per_case_label_and_every_refusal_reason() -> None:
    rows = list(csv.DictReader(io.StringIO(to_csv(_report()))))
    add, mul, pow_ = rows
    assert add["original_ms"] == "4.0" and add["best_ms"] == "2.0" and add["label"] == "measured"
    assert add["case_ms"] == "perf[0]=1->0.5; perf[1]=3->1.5"
    assert "perf harness" in add["method"]
    assert mul["reason"] == "original rejected: wrong_result"
    assert pow_["status"] == "load_failed" and pow_["reason"].startswith("interpreter_crash")


def test_json_report_holds_the_per_case_dicts() -> None:
    data = json.loads(to_json(_report()))
    first = data["problems"][0]
    assert first["original_case_ms"] == {"perf[0]": 1.0, "perf[1]": 3.0}
    assert first["best_case_ms"]["perf[1]"] == 1.5 and first["target"] == "h100"
