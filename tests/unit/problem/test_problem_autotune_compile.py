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
    assert done == len(blocks) - 1  # the bad config raised; the others still compiled
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
        def compile_all(fn: Any, args: Any, meta: Any, configs: list[Any]) -> int:
            calls.append(("compile", [c.block for c in configs]))
            return len(configs)

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


def test_nothing_is_patched_under_the_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert autotune_compile.install() is False


def test_threads_default_to_the_usable_cpus_at_most_eight(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.delenv("KERNELBAND_AUTOTUNE_COMPILE_THREADS", raising=False)
    assert autotune_compile.workers() == max(1, min(8, len(os.sched_getaffinity(0))))
    monkeypatch.setenv("KERNELBAND_AUTOTUNE_COMPILE_THREADS", "1")
    assert autotune_compile.workers() == 1
