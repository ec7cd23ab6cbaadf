"""device_scope sends cuda placements to the CPU and restores torch.cuda afterwards."""

from __future__ import annotations

import os

import pytest
import torch
import triton  # imported under the conftest's TRITON_INTERPRET=1: its library stays interpretable

from kernelband.problem import devices
from kernelband.problem.devices import device_scope, is_gpu_device


def test_factory_and_tensor_placements_are_remapped() -> None:
    with device_scope("cpu"):
        a = torch.zeros(3, device="cuda")
        b = torch.ones(2, device=torch.device("cuda:0"))
        c = torch.arange(4).cuda()
        d = torch.arange(4).to("cuda")
        e = torch.arange(4).to(device="cuda", dtype=torch.float16)
        assert a.is_cuda
    assert {t.device.type for t in (a, b, c, d, e)} == {"cpu"}
    assert e.dtype == torch.float16
    assert not a.is_cuda


def test_cuda_calls_are_harmless_inside_and_restored_after() -> None:
    original = torch.cuda.synchronize
    with device_scope("cpu"):
        torch.cuda.synchronize()
        with torch.cuda.device(0):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            end.record()
        assert end.elapsed_time(start) <= 0.0 <= start.elapsed_time(end)
    assert torch.cuda.synchronize is original


def test_gpu_device_without_gpu_is_a_clear_error() -> None:
    assert is_gpu_device("cuda:1") and not is_gpu_device("cpu")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(RuntimeError, match="no usable GPU"), device_scope("cuda"):
        pass


def test_capability_checks_take_the_gpu_path() -> None:
    with device_scope("cpu"):
        assert torch.cuda.get_device_capability()[0] >= 8
        assert torch.cuda.device_count() == 1


@pytest.fixture
def interpret_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that did not start under TRITON_INTERPRET (a GPU worker); restored afterwards."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(devices, "_saved_interpret", [devices._UNSET])


def _decorate() -> object:
    def kernel(x_ptr):  # type: ignore[no-untyped-def]
        pass

    return triton.jit(kernel)


def test_gpu_request_after_cpu_estimate_compiles_again(interpret_unset: None) -> None:
    from triton.runtime.interpreter import InterpretedFunction

    devices.use_interpreter_for("cpu")
    assert os.environ["TRITON_INTERPRET"] == "1"
    assert isinstance(_decorate(), InterpretedFunction)
    devices.use_interpreter_for("cuda")  # estimate first, then measure on the GPU
    assert "TRITON_INTERPRET" not in os.environ
    assert not isinstance(_decorate(), InterpretedFunction)


def test_interpreter_scope_restores_on_exit(interpret_unset: None) -> None:
    with devices.interpreter_scope("cpu"):
        assert os.environ["TRITON_INTERPRET"] == "1"
    assert "TRITON_INTERPRET" not in os.environ
    with pytest.raises(ZeroDivisionError), devices.interpreter_scope("cpu"):
        _ = 1 / 0
    assert "TRITON_INTERPRET" not in os.environ


def test_value_from_the_environment_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    # the sandbox starts its CPU children with TRITON_INTERPRET=1: nothing here may remove it
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(devices, "_saved_interpret", [devices._UNSET])
    devices.use_interpreter_for("cpu")
    devices.use_interpreter_for("cuda")
    with devices.interpreter_scope("cuda"):
        pass
    assert os.environ["TRITON_INTERPRET"] == "1"


def test_cuda_generator_state_is_a_seed_and_a_philox_offset() -> None:
    original = torch.cuda.default_generators
    with device_scope("cpu"):
        torch.manual_seed(1234)
        gen = torch.cuda.default_generators[torch.cuda.current_device()]
        state = gen.get_state()
        seed, offset = state.view(torch.int64)  # what Triton wrappers unpack (16 bytes)
        assert (int(seed), int(offset)) == (1234, 0) and state.dtype == torch.uint8
        offset += 8  # a view into the copy: the wrapper advances it and sets it back
        gen.set_state(state)
        assert gen.get_offset() == 8 and int(gen.get_state().view(torch.int64)[1]) == 8
        gen.manual_seed(99)
        assert gen.initial_seed() == 99 == torch.initial_seed() and gen.get_offset() == 0
    assert torch.cuda.default_generators is original
