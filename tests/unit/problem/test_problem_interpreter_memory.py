"""In the CPU interpreter a kernel's tensors sit between zero guard bands for each launch."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
import torch
from problem_testkit import kernel_module

from kernelband.problem import interpreter_memory
from kernelband.problem.devices import device_scope, use_interpreter_for

ROOT = Path(__file__).resolve().parents[3]
CORPUS = ROOT.parent / "shared" / "corpus" / "tritonbench-g" / "kernels"

KERNELS = '''
import triton
import triton.language as tl


@triton.jit
def shifted_copy(x, out, shift, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(x + offs + shift))  # no mask: may read past either end


@triton.jit
def spill(x, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x + offs, tl.load(x + offs) + 1.0)  # no mask: writes past the end too


@triton.jit
def add_into(src, dst, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(dst + offs) + tl.load(src + offs))


@triton.jit
def bad_shape(x, BLOCK: tl.constexpr):
    tl.store(x + tl.arange(0, BLOCK), tl.zeros([BLOCK + 1], dtype=tl.float32))
'''


def _module(tmp_path: Path) -> ModuleType:
    use_interpreter_for("cpu")
    return kernel_module(KERNELS, "guard_kernels", tmp_path)


def test_guard_band_grows_with_the_storage_within_bounds() -> None:
    assert interpreter_memory.guard_bytes(0) == interpreter_memory.GUARD_MIN
    assert interpreter_memory.guard_bytes(300_000) == 303_104  # rounded up to 4 KiB
    assert interpreter_memory.guard_bytes(1 << 40) == interpreter_memory.GUARD_MAX


@pytest.mark.parametrize("shift", [16, -16])
def test_reads_past_either_end_see_zeros_every_run(tmp_path: Path, shift: int) -> None:
    mod = _module(tmp_path)
    results = []
    for _ in range(2):
        neighbours = [torch.randn(64) for _ in range(8)]  # heap next to x holds data
        x = torch.randn(32)
        out = torch.full((32,), 7.0)
        with device_scope("cpu"):
            mod.shifted_copy[(1,)](x, out, shift, BLOCK=32)
        inside = x[16:] if shift > 0 else x[:16]
        kept, zeros = (out[:16], out[16:]) if shift > 0 else (out[16:], out[:16])
        assert torch.equal(kept, inside) and not bool(zeros.any())
        results.append(out)
        del neighbours
    assert not interpreter_memory.running()  # every launch's copies are gone


def test_stores_come_back_and_stores_past_the_end_are_dropped(tmp_path: Path) -> None:
    mod = _module(tmp_path)
    base = torch.arange(48, dtype=torch.float32)
    x, after = base[:16], base[16:]  # a view: the storage goes on past x
    small = torch.zeros(8)
    with device_scope("cpu"):
        mod.spill[(1,)](x, BLOCK=16)  # inside the storage: written back
        mod.spill[(1,)](small, BLOCK=16)  # past the storage's end: dropped
    assert torch.equal(x, torch.arange(16, dtype=torch.float32) + 1)
    assert torch.equal(after, torch.arange(16, 48, dtype=torch.float32))
    assert torch.equal(small, torch.ones(8))


def test_arguments_sharing_a_storage_share_one_copy(tmp_path: Path) -> None:
    mod = _module(tmp_path)
    buf = torch.ones(32)
    with device_scope("cpu"):
        mod.add_into[(1,)](buf[:16], buf[16:], BLOCK=16)
    assert torch.equal(buf[16:], torch.full((16,), 2.0)) and torch.equal(buf[:16], torch.ones(16))


def test_a_launch_that_raises_leaves_nothing_behind(tmp_path: Path) -> None:
    from triton.runtime.errors import InterpreterError

    mod = _module(tmp_path)
    x = torch.zeros(16)
    with device_scope("cpu"), pytest.raises(InterpreterError):
        mod.bad_shape[(1,)](x, BLOCK=16)
    assert not interpreter_memory.running()


def test_a_corpus_original_that_reads_past_a_tensor_is_accepted() -> None:
    """chunk_gla_simple reads past the end of `h` (its test passes one chunk of states for
    four): the heap there made it disagree with itself before the guard bands."""
    path = CORPUS / "chunk_gla_simple.py"
    if not path.is_file():
        pytest.skip(f"the TritonBench-G corpus is not at {CORPUS} (../shared/corpus from the "
                    "repo root)")
    from bench.corpus_check import check_one

    row = check_one(str(path), seeds=1)
    assert row["accepted"], row


def test_each_thread_has_its_own_launch_stack() -> None:
    import threading

    seen: list[object] = []
    worker = threading.Thread(target=lambda: seen.append(interpreter_memory.running()))
    worker.start()
    worker.join()
    assert seen and seen[0] is not interpreter_memory.running()
    assert interpreter_memory.running() is interpreter_memory.running()
