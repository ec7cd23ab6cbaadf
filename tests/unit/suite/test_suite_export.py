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
                          "passed", None),
            ProblemResult("23_Softmax", "kernelband", "h100", 2, "completed", False, None,
                          "measured", "untranslated", None))
    return SuiteReport("suite-kb", "level1", "kernelbench", SuiteSettings(targets=("h100",)),
                       datetime.now(UTC), (1, 2), 2, tuple(suite_metrics(rows)), rows, ())


def test_metrics_csv_has_one_column_per_fast_p() -> None:
    (row,) = csv.DictReader(io.StringIO(metrics_csv(_report())))
    assert (row["fast_0_pct"], row["fast_1_pct"], row["fast_1.5_pct"], row["fast_2_pct"]) == (
        "50.0", "50.0", "50.0", "0.0")
    assert "fast_p" not in row


def test_json_report_carries_fast_p() -> None:
    metric = json.loads(to_json(_report()))["metrics"][0]
    assert metric["fast_p"] == {"0": 50.0, "1": 50.0, "1.5": 50.0, "2": 0.0}
