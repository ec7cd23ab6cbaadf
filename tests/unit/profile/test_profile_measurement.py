"""Measurement and Features: labels, validation, JSON round trips; the estimate path end to end."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelband.problem import load_problem
from kernelband.profile.features import Features
from kernelband.profile.measure import Measurement, estimate_candidate, measure_candidate_task

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def test_measurement_requires_a_label_and_shows_it_first() -> None:
    with pytest.raises(ValueError, match="measured"):
        Measurement("timed", "x", "y", "h100", 1.0)
    est = Measurement("estimated", "cost model", "H100 (not run)", "h100", 0.5, {"a": 0.5})
    assert est.describe().startswith("estimated:")
    assert Measurement.from_dict(est.to_dict()) == est


def test_features_validate_their_shape_and_sources() -> None:
    good = Features((0.1, 32.0, 0.0, 7.0, 100.0), ("estimate",) + ("static",) * 4, (1.0, 2.0, 3.0), ("ncu",) * 3)
    assert Features.from_dict(good.to_dict()) == good
    assert good.named()["dram_pct"] == {"value": 2.0, "source": "ncu"}
    with pytest.raises(ValueError, match="unknown feature sources"):
        Features((0.0,) * 5, ("guess",) * 5, (0.0,) * 3, ("ncu",) * 3)
    with pytest.raises(ValueError, match="phi needs 5"):
        Features((0.0,) * 4, ("static",) * 4, (0.0,) * 3, ("ncu",) * 3)


@pytest.fixture(scope="module")
def vector_add():  # type: ignore[no-untyped-def]
    return load_problem((EXAMPLES / "vector_add.py").read_text(), "native", "vector_add")


def test_estimate_path_labels_everything_as_estimated(vector_add) -> None:  # type: ignore[no-untyped-def]
    measurement, features = estimate_candidate(vector_add, None, "cpu")
    assert measurement.label == "estimated" and measurement.target == "cpu"
    assert "reference GPU" in measurement.method and "not run" in measurement.device
    assert set(measurement.case_times_ms) == {c.name for c in vector_add.cases}
    assert measurement.time_ms == pytest.approx(sum(measurement.case_times_ms.values()))
    assert features.phi_sources[0] == "estimate" and set(features.h_sources) == {"estimate"}
    assert "ncu" not in features.phi_sources and "driver" not in features.phi_sources


def test_a_child_is_compared_with_its_parent(vector_add) -> None:  # type: ignore[no-untyped-def]
    child = vector_add.editable.replace("BLOCK_SIZE = 64", "BLOCK_SIZE = 1024")
    assert child != vector_add.editable
    measurement, _ = estimate_candidate(vector_add, child, "h100", parent_editable=vector_add.editable)
    parent, _ = estimate_candidate(vector_add, None, "h100")
    assert measurement.paired_ratio == pytest.approx(measurement.time_ms / parent.time_ms)
    assert measurement.label == "estimated"


def test_task_function_speaks_plain_dicts(vector_add) -> None:  # type: ignore[no-untyped-def]
    out = measure_candidate_task({"problem": vector_add.to_dict(), "editable": None, "target": "a100"})
    assert out["measurement"]["label"] == "estimated" and len(out["features"]["phi"]) == 5


def test_sandboxed_measure_on_a_cpu_node_returns_the_estimate(vector_add) -> None:  # type: ignore[no-untyped-def]
    from kernelband.profile import measure_candidate

    measurement, features = measure_candidate(vector_add, None, "cpu")
    assert measurement.label == "estimated" and measurement.describe().startswith("estimated:")
    assert features.h_sources == ("estimate",) * 3
