"""The GPU adversarial validation is ready to run: its problem loads and its candidates get past
the static checks (so a lent GPU's minutes test the runtime defences, not a typo)."""

from __future__ import annotations

import pytest

from bench.gpu import adversarial
from kernelband.evaluate import check_source
from kernelband.problem import load_problem
from kernelband.problem.devices import interpreter_scope


@pytest.mark.parametrize("name", sorted(adversarial.CANDIDATES))
def test_every_gpu_candidate_passes_the_static_checks(name: str) -> None:
    assert check_source(adversarial.KERNEL + adversarial.CANDIDATES[name][1]) is None


def test_the_problem_loads_with_the_size_of_the_h100_exploit(tmp_path: object) -> None:
    with interpreter_scope("cpu"):  # TRITON_INTERPRET is as before afterwards
        problem = load_problem(adversarial.PROBLEM, "native", "adversarial_add",
                               workdir=tmp_path, device="cpu")  # type: ignore[arg-type]
    assert problem.cases[0].params["n"] == 1 << 24 and problem.held_out_cases


def test_the_gpu_only_classes_of_the_issue_are_all_there() -> None:
    assert {"call_counting", "cache_by_address", "cache_by_fingerprint", "side_stream",
            "lazy_output", "honest"} <= set(adversarial.CANDIDATES)


def test_it_refuses_to_run_without_a_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert adversarial.main(["--out", "/tmp/kb-adversarial-none"]) == 2
    assert "no CUDA GPU" in capsys.readouterr().err
