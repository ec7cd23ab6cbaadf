"""On a GPU the checks' launches run between zero guard bands; here the wrapper runs on CPU
tensors (DEVICE_TYPE pointed at "cpu") around a stand-in for Triton's launch."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch.overrides import TorchFunctionMode

from kernelband.problem import cuda_guard
from kernelband.problem.guard_bands import guard_bytes


@pytest.fixture(autouse=True)
def _cpu_tensors_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cuda_guard, "DEVICE_TYPE", "cpu")


def _launch(body: Any) -> Any:
    """A guarded stand-in for `JITFunction.run` whose 'kernel' is `body(*args)`."""
    return cuda_guard.guarded_run(lambda _self, *args, **kwargs: body(*args, **kwargs))


def _whole(t: torch.Tensor) -> torch.Tensor:
    """Every byte of the storage `t` is a view of."""
    return torch.empty(0, dtype=torch.uint8).set_(t.untyped_storage())


def test_inside_the_scope_a_launch_sees_zeros_past_its_tensors_and_stores_come_back() -> None:
    x = torch.arange(1.0, 9.0)
    seen: dict[str, Any] = {}

    def kernel(t: torch.Tensor, grid: Any = None) -> None:
        seen["same_storage"] = t.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
        band = guard_bytes(x.untyped_storage().nbytes())
        whole = _whole(t)
        seen["band_zero"] = not bool(whole[:band].any()) and not bool(whole[band + 32:].any())
        t.mul_(2)  # a store inside the tensor
        whole[band + 32:band + 64].fill_(0xFF)  # a store past its end

    with cuda_guard.guarded_launches():
        _launch(kernel)(None, x, grid=(1,))
    assert seen == {"same_storage": False, "band_zero": True}
    assert torch.equal(x, torch.arange(1.0, 9.0) * 2)  # written back; the spill was dropped


def test_arguments_sharing_a_storage_share_one_copy() -> None:
    buf = torch.ones(32)

    def kernel(src: torch.Tensor, dst: torch.Tensor, grid: Any = None) -> None:
        assert src.untyped_storage().data_ptr() == dst.untyped_storage().data_ptr()
        dst.add_(src)

    with cuda_guard.guarded_launches():
        _launch(kernel)(None, buf[:16], buf[16:], grid=(1,))
    assert torch.equal(buf[16:], torch.full((16,), 2.0)) and torch.equal(buf[:16], torch.ones(16))


@pytest.mark.parametrize("where", ["outside the scope", "autotune benchmark", "warmup"])
def test_unguarded_launches_run_on_the_callers_tensors(where: str) -> None:
    x = torch.zeros(4)
    ptrs: list[int] = []
    launch = _launch(lambda t, grid=None, warmup=False: ptrs.append(t.data_ptr()))
    if where == "outside the scope":
        launch(None, x, grid=(1,))
    elif where == "warmup":
        with cuda_guard.guarded_launches():
            launch(None, x, grid=(1,), warmup=True)
    else:
        bench = cuda_guard._counting_bench(lambda _self: launch(None, x, grid=(1,)))
        with cuda_guard.guarded_launches():
            bench(None)
    assert ptrs == [x.data_ptr()]


def test_the_copies_are_not_torch_work_of_the_caller() -> None:
    calls: list[str] = []

    class Count(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            calls.append(getattr(func, "__name__", str(func)))
            return func(*args, **(kwargs or {}))

    x = torch.zeros(4)
    with cuda_guard.guarded_launches(), Count():
        _launch(lambda t, grid=None: None)(None, x, grid=(1,))
    assert calls == []


def test_a_launch_that_raises_still_writes_back_and_leaves_the_scope_usable() -> None:
    x = torch.zeros(4)

    def kernel(t: torch.Tensor, grid: Any = None) -> None:
        t.fill_(3.0)
        raise RuntimeError("launch failed")

    with cuda_guard.guarded_launches(), pytest.raises(RuntimeError, match="launch failed"):
        _launch(kernel)(None, x, grid=(1,))
    assert torch.equal(x, torch.full((4,), 3.0))
    assert cuda_guard._depth("active") == 0


def test_installing_wraps_triton_once() -> None:
    from triton.runtime import autotuner, jit

    with cuda_guard.guarded_launches(), cuda_guard.guarded_launches():
        pass
    run = jit.JITFunction.__dict__["run"]
    assert getattr(run, cuda_guard._MARK, False)
    assert not getattr(run.__wrapped__, cuda_guard._MARK, False)  # not wrapped twice
    assert getattr(autotuner.Autotuner.__dict__["_bench"], cuda_guard._MARK, False)


def test_removing_the_guard_puts_back_what_it_wrapped_and_it_comes_back_when_asked() -> None:
    from triton.runtime import autotuner, jit

    with cuda_guard.guarded_launches():
        pass
    wrapped = jit.JITFunction.__dict__["run"].__wrapped__
    cuda_guard.remove_guard()
    assert jit.JITFunction.__dict__["run"] is wrapped  # a launch goes through Triton's own code
    assert not getattr(autotuner.Autotuner.__dict__["_bench"], cuda_guard._MARK, False)
    cuda_guard.remove_guard()  # nothing of its own in place: nothing to do
    assert jit.JITFunction.__dict__["run"] is wrapped
    with cuda_guard.guarded_launches():
        assert getattr(jit.JITFunction.__dict__["run"], cuda_guard._MARK, False)
