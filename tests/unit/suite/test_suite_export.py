"""The suite metrics export carries KernelBench's fast_p beside Correct and Fast@1."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime

from kernelband.suite import SuiteReport, SuiteSettings, to_json
from kernelband.suite.export import metrics_csv
from kernelband.suite.metrics import ProblemResult, suite_metrics


def _report() -> SuiteReport:
    rows = (ProblemResult("19_ReLU", "kernelband", "h100", 1, "completed", True, 1.6, "measured",
                          "passed", None, speedup_low=1.55, speedup_high=1.66,
                          speedup_method="bootstrap 95%, 30 rounds"),
            ProblemResult("23_Softmax", "kernelband", "h100", 2, "completed", False, None,
                          "measured", "untranslated", None))
    return SuiteReport("suite-kb", "level1", "kernelbench", SuiteSettings(targets=("h100",)),
                       datetime.now(UTC), (1, 2), 2, tuple(suite_metrics(rows)), rows, ())


def test_metrics_csv_has_one_column_per_fast_p() -> None:
    (row,) = csv.DictReader(io.StringIO(metrics_csv(_report())))
    assert (row["fast_0_pct"], row["fast_1_pct"], row["fast_1.5_pct"], row["fast_2_pct"]) == (
        "50.0", "50.0", "50.0", "0.0")
    assert "fast_p" not in row
    assert row["fast1_point_pct"] == "50.0"


def test_csv_rows_carry_the_interval_and_its_text() -> None:
    from kernelband.suite import to_csv

    relu, softmax = list(csv.DictReader(io.StringIO(to_csv(_report()))))
    assert (relu["speedup"], relu["speedup_low"], relu["speedup_high"]) == ("1.6", "1.55", "1.66")
    assert relu["significant"] == "True" and relu["speedup_text"] == "1.60x [1.55, 1.66]"
    assert softmax["speedup"] == "" and softmax["speedup_text"] == "not measured"


def test_json_report_carries_fast_p() -> None:
    metric = json.loads(to_json(_report()))["metrics"][0]
    assert metric["fast_p"] == {"0": 50.0, "1": 50.0, "1.5": 50.0, "2": 0.0}
