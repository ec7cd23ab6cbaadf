"""An autotuned kernel's configs compile side by side before the autotuner times them.

There is no GPU here, so the kernel stand-in compiles for sm_90 with `triton.compile` the way
`JITFunction` does under Triton's `AsyncCompileMode` (submitting the compile to the mode)."""

from __future__ import annotations

import threading
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from problem_testkit import kernel_module

from kernelband.problem import autotune_compile

KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def scale(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(x + offs, mask=offs < n) * 2, mask=offs < n)
'''


def _kernel(tmp_path: Path) -> ModuleType:
    return kernel_module(KERNEL, "ac_kernel", tmp_path)


class AotKernel:
    """Compiles `jit` for sm_90 per config; under AsyncCompileMode the compile is submitted."""

    def __init__(self, jit: Any) -> None:
        self.jit = jit
        self.threads: set[str] = set()
        self.compiled: list[int] = []

    def run(self, *args: Any, BLOCK: int, warmup: bool, **meta: Any) -> Any:
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
        from triton.runtime import _async_compile

        assert warmup, "compile_all must not launch"
        if BLOCK == 3:
            raise ValueError("BLOCK must be a power of two")  # a config that cannot compile
        from kernelband.profile.specialize import as_jit_function, deinterpreted

        source = ASTSource(as_jit_function(self.jit),
                           {"x": "*fp32", "out": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                           constexprs={(3,): BLOCK})

        def build() -> Any:
            self.threads.add(threading.current_thread().name)
            with deinterpreted():
                kernel = triton.compile(source, target=GPUTarget("cuda", 90, 32))
            self.compiled.append(BLOCK)
            return kernel

        mode = _async_compile.active_mode.get()
        assert mode is not None, "compile_all compiles under AsyncCompileMode"
        return mode.submit(("scale", BLOCK), build, lambda kernel: None, lambda future: None)


class Config:
    def __init__(self, block: int) -> None:
        self.block = block

    def all_kwargs(self) -> dict[str, Any]:
        return {"BLOCK": self.block}


def test_every_config_compiles_on_several_threads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("KERNELBAND_AUTOTUNE_COMPILE_THREADS", "4")
    fn = AotKernel(_kernel(tmp_path).scale)
    blocks = [32, 64, 128, 256, 512, 1024, 3]
    done = autotune_compile.compile_all(fn, (None, None, 1000), {"grid": (1,), "warmup": False},
                                        [Config(b) for b in blocks])
    assert done.compiled == len(blocks) - 1  # the bad config raised; the others still compiled
    assert done.late == []
    assert sorted(fn.compiled) == sorted(b for b in blocks if b != 3)
    assert len(fn.threads) > 1 and all(t.startswith("kernelband-compile") for t in fn.threads)


def test_the_first_timing_of_a_round_compiles_the_round_once() -> None:
    calls: list[tuple[str, Any]] = []

    class Tuner:
        fn = "kernel"

        def prune_configs(self, kwargs: dict[str, Any]) -> list[Any]:
            return [Config(b) for b in (16, 32, 64, 128)]

        def _bench(self, *args: Any, config: Any, **meta: Any) -> float:
            calls.append(("time", config.block))
            return 1.0

    Tuner.prune_configs = autotune_compile._remembering_prune(Tuner.prune_configs)  # type: ignore[method-assign]
    Tuner._bench = autotune_compile._compiling_bench(Tuner._bench)  # type: ignore[method-assign]
    original = autotune_compile.compile_all
    try:
        def compile_all(fn: Any, args: Any, meta: Any, configs: list[Any],
                        deadline_s: float = 0.0) -> autotune_compile.RoundResult:
            calls.append(("compile", [c.block for c in configs]))
            return autotune_compile.RoundResult(compiled=len(configs))

        autotune_compile.compile_all = compile_all  # type: ignore[assignment]
        tuner = Tuner()
        for config in tuner.prune_configs({}):
            tuner._bench(1, 2, config=config, grid=(1,))
        tuner._bench(1, 2, config=Config(16), grid=(1,))  # no new round: no compile
    finally:
        autotune_compile.compile_all = original  # type: ignore[assignment]
    assert calls[0] == ("compile", [16, 32, 64, 128])
    assert [c for c in calls if c[0] == "compile"] == [calls[0]]
    assert [b for kind, b in calls if kind == "time"] == [16, 32, 64, 128, 16]


class SleepingKernel:
    """Stand-in whose compile of a config takes `seconds[BLOCK]` (a sleep, no compiler)."""

    def __init__(self, seconds: dict[int, float]) -> None:
        self.seconds = seconds
        self.finalized: list[int] = []

    def run(self, *args: Any, BLOCK: int, warmup: bool, **meta: Any) -> Any:
        import time

        from triton.runtime import _async_compile

        def build() -> Any:
            time.sleep(self.seconds[BLOCK])
            return f"kernel-{BLOCK}"

        mode = _async_compile.active_mode.get()
        assert mode is not None
        return mode.submit(("sleep", BLOCK), build, lambda kernel: self.finalized.append(BLOCK),
                           lambda future: None)


def _round(seconds: dict[int, float], deadline_s: float) -> tuple[autotune_compile.RoundResult, float, SleepingKernel]:
    import time

    fn = SleepingKernel(seconds)
    started = time.monotonic()
    result = autotune_compile.compile_all(fn, (), {"grid": (1,)}, [Config(b) for b in seconds], deadline_s)
    return result, time.monotonic() - started, fn


def test_a_config_still_compiling_past_the_deadline_is_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELBAND_AUTOTUNE_COMPILE_THREADS", "4")
    result, took, fn = _round({16: 0.05, 32: 0.1, 64: 5.0}, deadline_s=0.5)
    assert [c.block for c in result.late] == [64]
    assert took < 2.0  # not waited for
    assert len(result.late_threads) == 1 and threading.get_ident() not in result.late_threads
    assert sorted(fn.finalized) == [16, 32]  # the finished ones are in the kernel's cache


def test_without_a_deadline_every_config_is_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELBAND_AUTOTUNE_COMPILE_THREADS", "4")
    result, took, fn = _round({16: 0.05, 64: 0.8}, deadline_s=0.0)
    assert result.late == [] and took >= 0.8 and sorted(fn.finalized) == [16, 64]


def test_when_every_config_is_slow_the_first_to_finish_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELBAND_AUTOTUNE_COMPILE_THREADS", "4")
    result, took, fn = _round({16: 0.6, 64: 5.0}, deadline_s=0.1)
    assert [c.block for c in result.late] == [64] and fn.finalized == [16]
    assert 0.6 <= took < 2.0


def test_a_queued_config_gets_its_own_deadline_once_it_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELBAND_AUTOTUNE_COMPILE_THREADS", "2")
    # 64 waits for a thread until 16 finishes at 0.4 s; then it compiles in 0.4 s, within 0.6
    result, _, fn = _round({16: 0.4, 32: 5.0, 64: 0.4}, deadline_s=0.6)
    assert [c.block for c in result.late] == [32] and sorted(fn.finalized) == [16, 64]


def test_a_late_config_is_timed_as_failing_and_reported(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KERNELBAND_AUTOTUNE_COMPILE_THREADS", "4")
    timed: list[int] = []
    heard: list[set[int]] = []

    class Tuner:
        fn = SleepingKernel({16: 0.05, 64: 5.0})

        def prune_configs(self, kwargs: dict[str, Any]) -> list[Any]:
            return [Config(16), Config(64)]

        def _bench(self, *args: Any, config: Any, **meta: Any) -> list[float]:
            timed.append(config.block)
            return [1.0, 1.0, 1.0]

    Tuner.prune_configs = autotune_compile._remembering_prune(Tuner.prune_configs)  # type: ignore[method-assign]
    Tuner._bench = autotune_compile._compiling_bench(Tuner._bench)  # type: ignore[method-assign]
    monkeypatch.setattr(autotune_compile, "POLICY", autotune_compile.Policy(0.3, heard.append))
    tuner = Tuner()
    timings = {c.block: tuner._bench(config=c, grid=(1,)) for c in tuner.prune_configs({})}
    assert timings == {16: [1.0, 1.0, 1.0], 64: [float("inf")] * 3}
    assert timed == [16] and len(heard) == 1 and len(heard[0]) == 1
    assert "left out of its tuning round" in capsys.readouterr().err


def test_nothing_is_patched_under_the_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert autotune_compile.install() is False


def test_threads_default_to_the_usable_cpus_at_most_eight(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.delenv("KERNELBAND_AUTOTUNE_COMPILE_THREADS", raising=False)
    assert autotune_compile.workers() == max(1, min(8, len(os.sched_getaffinity(0))))
    monkeypatch.setenv("KERNELBAND_AUTOTUNE_COMPILE_THREADS", "1")
    assert autotune_compile.workers() == 1
