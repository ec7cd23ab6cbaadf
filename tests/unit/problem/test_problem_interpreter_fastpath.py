"""Inside a launch, the interpreter patches triton.language once (not once per helper call)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
import torch
from problem_testkit import kernel_module

from kernelband.problem import interpreter_fastpath
from kernelband.problem.devices import device_scope, use_interpreter_for

KERNELS = '''
import triton
import triton.language as tl


@triton.jit
def twice(x):
    return x * 2


@triton.jit
def helper_kernel(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, twice(tl.load(x + offs, mask=offs < n)), mask=offs < n)
'''


def _module(tmp_path: Path) -> ModuleType:
    use_interpreter_for("cpu")
    return kernel_module(KERNELS, "fastpath_kernels", tmp_path)


def test_helper_calls_do_not_patch_the_language_again(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from triton.runtime import interpreter

    mod = _module(tmp_path)
    calls: list[object] = []
    real = interpreter._LangPatchScope

    class CountingScope(real):  # type: ignore[misc,valid-type]
        def __init__(self) -> None:
            calls.append(self)
            super().__init__()

    monkeypatch.setattr(interpreter, "_LangPatchScope", CountingScope)
    x = torch.randn(40 * 16)
    out = torch.zeros_like(x)
    with device_scope("cpu"):
        mod.helper_kernel[(40,)](x, out, x.numel(), BLOCK=16)
    assert torch.equal(out, x * 2)
    # one full patching for the launch; Triton's own code patched again on each of the 40
    # helper calls (one per program)
    assert len(calls) == 1
    assert not interpreter_fastpath._patched_now  # the launch is over


def test_language_is_restored_after_the_launch(tmp_path: Path) -> None:
    import triton.language as tl

    mod = _module(tmp_path)
    before = tl.load
    x = torch.randn(64)
    out = torch.zeros_like(x)
    with device_scope("cpu"):
        mod.helper_kernel[(4,)](x, out, x.numel(), BLOCK=16)
    assert tl.load is before and torch.equal(out, x * 2)


def test_numpy_dtypes_are_remembered_and_unchanged() -> None:
    import triton.language as tl
    from triton.runtime import interpreter

    use_interpreter_for("cpu")
    for dtype in (tl.float16, tl.float32, tl.int32, tl.bfloat16, tl.pointer_type(tl.float32)):
        first, again = interpreter._get_np_dtype(dtype), interpreter._get_np_dtype(dtype)
        assert first == again
    assert str(interpreter._get_np_dtype(tl.block_type(tl.float16, [16]))) == "float16"
    pointers = tl.block_type(tl.pointer_type(tl.float32), [4])
    assert str(interpreter._get_np_dtype(pointers)) == "uint64"


OVERFLOW = '''
import triton
import triton.language as tl


@triton.jit
def int32_add(x, out, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(x + offs) + 2147483647)
'''


def test_dead_overflow_checks_are_skipped_and_results_unchanged(tmp_path: Path) -> None:
    from triton.runtime import interpreter

    use_interpreter_for("cpu")
    options = interpreter.interpreter_builder.options
    # the check's assert only fires with debug on, and the interpreter never turns it on
    assert not options.debug and not options.sanitize_overflow
    path = tmp_path / "overflow_kernels.py"
    path.write_text(OVERFLOW)
    spec = importlib.util.spec_from_file_location("overflow_kernels", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = torch.arange(4, dtype=torch.int32)
    out = torch.zeros_like(x)
    with device_scope("cpu"):
        module.int32_add[(1,)](x, out, BLOCK=4)
    assert out.tolist() == (x.long() + 2147483647 - (1 << 32) * (x > 0)).tolist()  # wraps


def test_overflow_checks_stay_where_debug_is_on() -> None:
    from triton.runtime.interpreter import InterpreterOptions

    builder = type("Builder", (), {})()
    builder.options = InterpreterOptions(debug=True)
    interpreter_fastpath._skip_dead_overflow_checks(builder)
    assert builder.options.sanitize_overflow
    builder.options = InterpreterOptions()
    interpreter_fastpath._skip_dead_overflow_checks(builder)
    assert not builder.options.sanitize_overflow
