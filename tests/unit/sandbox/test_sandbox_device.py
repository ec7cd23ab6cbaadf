"""An original kernel's failure in the CPU interpreter is named as the interpreter's."""

from __future__ import annotations

from kernelband.sandbox.device import GPU_TARGETS, interpreter_refusal


def test_timeouts_crashes_and_missing_features_name_the_interpreter_and_a_gpu() -> None:
    for reason, message, expected in (
        ("timeout", "the run exceeded its limit", "interpreter_timeout"),
        ("crashed:SIGSEGV", "killed by a signal", "interpreter_crash"),
        ("load_error", "InterpreterError: NotImplementedError(...)", "interpreter_unsupported"),
        ("load_error", "AssertionError: CUDA tensors only but got cpu", "interpreter_unsupported"),
    ):
        found = interpreter_refusal(reason, message)
        assert found is not None and found[0] == expected
        assert "CPU Triton interpreter" in found[1] and GPU_TARGETS in found[1]


def test_a_files_own_failure_is_left_alone() -> None:
    assert interpreter_refusal("wrong_result", "max_abs_err 3") is None
    assert interpreter_refusal("load_error", "TypeError: bad operand in the wrapper") is None


def test_an_original_that_disagrees_with_itself_in_the_interpreter_names_the_interpreter() -> None:
    from kernelband.sandbox.device import ORIGINAL_MOVED, interpreter_irreproducible

    for reason in ("wrong_result", "nan_mismatch", "nondeterministic"):
        found = interpreter_irreproducible(reason, f"case a: differs ({ORIGINAL_MOVED}: ...)")
        assert found is not None and found[0] == "interpreter_irreproducible"
        assert "CPU Triton interpreter" in found[1] and GPU_TARGETS in found[1]
    assert interpreter_irreproducible("timeout", "the run exceeded its limit") is None
    assert interpreter_irreproducible("decoy_torch_compute", "torch did the work") is None
