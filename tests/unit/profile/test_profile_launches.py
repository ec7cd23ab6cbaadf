"""capture_launches records every Triton launch, executed or dry, and restores Triton after."""

from __future__ import annotations

from types import ModuleType

import torch

from kernelband.profile.launches import LaunchRecord, capture_launches


def test_records_kernel_arguments_grid_and_options(kernels: ModuleType) -> None:
    x, y = torch.randn(3000), torch.randn(3000)
    with capture_launches() as records:
        out = kernels.add(x, y, block=1024, num_warps=2)
    assert torch.allclose(out, x + y)
    (record,) = records
    assert isinstance(record, LaunchRecord)
    assert record.kernel_name == "add_kernel" and record.interpreted
    assert record.grid == (3, 1, 1) and record.num_blocks == 3
    assert record.num_warps == 2 and record.num_stages == 3
    assert list(record.args) == ["x_ptr", "y_ptr", "out_ptr", "n", "BLOCK"]
    assert record.args["n"] == 3000 and record.args["BLOCK"] == 1024
    assert record.summary()["args"]["x_ptr"] == {"dtype": "float32", "shape": [3000], "nbytes": 12000}


def test_callable_grids_are_evaluated_with_the_bound_arguments(kernels: ModuleType) -> None:
    a, b = torch.randn(64, 32).half(), torch.randn(32, 128).half()
    with capture_launches(execute=False) as records:
        kernels.matmul(a, b, bm=32, bn=64, bk=16, num_warps=4, num_stages=2)
    (record,) = records
    assert record.grid == (2, 2, 1) and record.num_stages == 2


def test_dry_capture_does_not_run_kernels(kernels: ModuleType) -> None:
    x = torch.randn(256)
    out_marker = torch.full_like(x, 7.0)
    with capture_launches(execute=False) as records:
        kernels.add_kernel[(1,)](x, x, out_marker, 256, BLOCK=256)
    assert len(records) == 1 and torch.all(out_marker == 7.0)


def test_nested_captures_see_the_same_launches_and_patches_are_removed(kernels: ModuleType) -> None:
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    before = (JITFunction.run, InterpretedFunction.run)
    x = torch.randn(64)
    with capture_launches() as outer:
        kernels.add(x, x, block=64)
        with capture_launches() as inner:
            kernels.add(x, x, block=32)
    assert [r.args["BLOCK"] for r in outer] == [64, 32]
    assert [r.args["BLOCK"] for r in inner] == [32]
    assert (JITFunction.run, InterpretedFunction.run) == before
    with capture_launches() as none:
        pass
    assert none == []


def test_autotuner_config_timing_is_marked(kernels: ModuleType) -> None:
    from triton.runtime.autotuner import Autotuner

    before = Autotuner._bench
    x = torch.randn(1000)
    with capture_launches() as records:
        out = kernels.tuned_copy(x)
    assert torch.equal(out, x)
    timed = [r for r in records if r.autotune_benchmark]
    final = [r for r in records if not r.autotune_benchmark]
    assert {r.args["BLOCK"] for r in timed} == {128, 256}
    assert len(final) == 1 and final[0].args["BLOCK"] in (128, 256)
    assert Autotuner._bench is before
