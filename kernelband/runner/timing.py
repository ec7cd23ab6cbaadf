"""The runner side of paired timing: serves a judge's commands in a sandboxed child.

Started by `kernelband.sandbox.session.RunnerSession` (target `serve_task`). Commands arrive as
JSON lines on one FIFO, replies leave on another (see that module):

- `load {problem, editable, device, seed, graphs, call, inputs_on_device}`: import the problem
  with `editable` as its region (None: the original); `call` "reference" times the reference
  instead of the region's entry. Replies the names of the timed cases and, with a performance
  harness, where its inputs were drawn (`inputs_drawn`: on a GPU with `inputs_on_device`, the
  device where the draw runs there, else the host: kernelband/profile/perf_harness.py).
- `prepare {case, seed, fresh}`: build the case's inputs for `seed`, run it once (compiles,
  autotunes) and synchronize; with `graphs`, capture one call as a CUDA graph. A case prepared
  before only has its inputs refilled, unless `fresh`.
- `run_batch {case, k, salt}`: overwrite a few input elements (chosen by `salt`, the same in
  both runners), k calls (or k graph replays), synchronize, reply. The judge times this command
  with its own clock; `runner_ms` is this process's own figure, which the judge only
  cross-checks and never stores. `fingerprint` (sum of squares of the last output) commits the
  runner to that output before the judge says which batch it will check.
- `save_output {case, name}`: write the last call's output (and in-place arguments) to
  `name` in the workdir with `torch.save`; the judge loads it with `weights_only=True`.
- `features {target, slowest, time_ms}` (GPU): phi, the Nsight Compute case, the Triton share.
- `autotune_picks {}` / `pin_autotune {pins}`: the configs this runner's autotuned kernels
  picked; another runner's picks taken for unchanged kernels (kernelband/runner/autotune.py).
  `autotune_compile_only {on}`: start or end a pass in which autotuners run each config once
  (compiling it) and time none; the picks made meanwhile are forgotten at its end.
- `check {problem, count_launches, steps, again}`: the correctness steps on the loaded candidate
  (kernelband/runner/correctness.py `check_loaded`), outputs written as files for the judge.
- `ping {}`: an empty answer (the runner is up); `init_device {device}`: the device's context
  made before any code is loaded, so a runner started ahead of its candidate has paid for it.
- `preload {problem, device, seed, inputs_on_device}`: a runner started ahead of a candidate (a spare) imports the
  problem's original and, with a performance harness, draws the harness's inputs from `seed`, as
  `load` would; a later `load` of the same problem and seed takes both instead of redoing them.

A `prepare` reply carries `spent_ms` (releasing memory, new inputs, the untimed call): this
process's own account, for finding where a step's time goes; the judge never stores it as a time.

Everything here runs in the same process as untrusted code, so nothing it reports is trusted.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy
import torch

from kernelband.evaluate.gpu_share import triton_share
from kernelband.evaluate.integrity import TimerSeal
from kernelband.evaluate.verified_timing import output_fingerprint
from kernelband.evaluate.verified_timing import salt as overwrite
from kernelband.problem.model import KernelProblem
from kernelband.problem.runtime import load_runtime
from kernelband.profile.gpu import gpu_features
from kernelband.profile.perf_harness import (
    draw_inputs,
    harness_prepares,
    load_harness,
    region_prepare,
)
from kernelband.profile.timing import CudaDevice
from kernelband.runner import autotune
from kernelband.runner.correctness import check_loaded
from kernelband.runner.outputs import save_file

MAX_BATCH = 100_000


@dataclass
class _Case:
    run: Callable[[], Any]
    args: list[Any] = field(default_factory=list)
    last: Any = None
    graph: Any = None


class TimingServer:
    """The state of one runner: the loaded problem and the prepared cases."""

    def __init__(self) -> None:
        self.problem: Any = None
        self.runtime: Any = None
        self.device = "cpu"
        self.graphs = False
        self.call = "candidate"
        self.cases: dict[str, _Case] = {}
        self.harness: dict[str, Callable[[], Callable[[], Any]]] = {}
        self.batches = 0
        self.pinning: dict[str, Any] = {}  # the cores this runner's batches run on (told with `load`)
        self.pin_before_batch: list[int] | None = None  # taken at the first batch
        self.pads: dict[str, Any] = {}  # per case, device memory held so its inputs move
        # (problem key, original module, harness, where its inputs were drawn)
        self.preloaded: tuple[str, Any, Any, str] | None = None
        self.inputs_drawn = ""  # "device" or "host" for a harness's inputs (perf_harness.draw_inputs)
        self.seal = TimerSeal()  # before any untrusted code (a problem module, a candidate) runs here

    def handle(self, msg: dict[str, Any]) -> dict[str, Any]:
        handler = getattr(self, f"cmd_{msg.get('cmd')}", None)
        if handler is None:
            return {"ok": False, "error": f"unknown command {msg.get('cmd')!r}"}
        result: dict[str, Any] = handler(msg)
        return {"ok": True, **result}

    def cmd_load(self, msg: dict[str, Any]) -> dict[str, Any]:
        self.problem = KernelProblem.from_dict(msg["problem"])
        self.device = str(msg.get("device") or "cpu")
        self.graphs = bool(msg.get("graphs"))
        # "reference": time the problem's reference (a KernelBench file's PyTorch Model, the
        # baseline of its translations); "candidate": the loaded region's entry
        self.call = "reference" if msg.get("call") == "reference" else "candidate"
        if self.graphs and not self.device.startswith("cuda"):
            raise ValueError("CUDA graphs need a GPU; time with many launches (graphs=False) on the CPU")
        key = _preload_key(msg)
        original, drawn, drawn_on = self.preloaded[1:] if self.preloaded and self.preloaded[0] == key else (
            None, None, "")
        self.preloaded = None
        self.runtime = load_runtime(self.problem, msg.get("editable"), self.device, workdir=os.getcwd(),
                                    original=original)
        if self.problem.format == "tritonbench":
            seed = int(msg.get("seed", 0))
            if drawn is None:
                _seed_everything(seed)  # both runners draw the same harness inputs
            self.harness = dict(self._harness_cases(drawn, drawn_on, seed, bool(msg.get("inputs_on_device"))))
            return {"cases": list(self.harness), "verifiable": False, "preloaded": original is not None,
                    "inputs_drawn": self.inputs_drawn, **self.pinning}
        return {"cases": [c.name for c in self.problem.cases], "verifiable": True,
                "preloaded": original is not None, **self.pinning}

    def cmd_preload(self, msg: dict[str, Any]) -> dict[str, Any]:
        problem = KernelProblem.from_dict(msg["problem"])
        device = str(msg.get("device") or "cpu")
        runtime = load_runtime(problem, None, device, workdir=os.getcwd())
        harness, drawn_on = None, ""
        if problem.format == "tritonbench" and problem.perf_source:
            seed = int(msg.get("seed", 0))
            _seed_everything(seed)
            harness = load_harness(problem.perf_source, runtime.original_module, Path.cwd(), "preloaded")
            drawn_on = _draw(harness, device, seed, bool(msg.get("inputs_on_device")))
        self.preloaded = (_preload_key(msg), runtime.original_module, harness, drawn_on)
        return {}

    def _harness_cases(self, drawn: Any, drawn_on: str, seed: int,
                       on_device: bool) -> list[tuple[str, Callable[[], Callable[[], Any]]]]:
        """What TritonBench-G times: the performance harness's inputs (call_op alone), or the
        test's calls into the region (kernelband/profile/perf_harness.py). `drawn`: a harness
        whose inputs `preload` drew from the same seed (taken instead of drawing them again),
        `drawn_on` where. Where the inputs were drawn goes back to the judge (`inputs_drawn`)."""
        if self.problem.perf_source:
            harness = load_harness(self.problem.perf_source, self.runtime.candidate_module, Path.cwd(), "candidate")
            if drawn is not None:
                self.inputs_drawn = drawn_on
                return harness_prepares(harness, self.device, inputs_from=drawn)
            self.inputs_drawn = _draw(harness, self.device, seed, on_device)
            return harness_prepares(harness, self.device, drawn=True)
        return [("region_calls", region_prepare(self.problem, self.runtime, "candidate", self.device))]

    def cmd_check(self, msg: dict[str, Any]) -> dict[str, Any]:
        return check_loaded(self.runtime, msg, self.seal)

    def cmd_ping(self, msg: dict[str, Any]) -> dict[str, Any]:
        return {}

    def cmd_init_device(self, msg: dict[str, Any]) -> dict[str, Any]:
        device = str(msg.get("device") or "cpu")
        if device.startswith("cuda"):
            torch.zeros(1, device=device)  # the context and the caching allocator's first segment
            torch.cuda.synchronize()
        return {}

    def cmd_prepare(self, msg: dict[str, Any]) -> dict[str, Any]:
        marks = [time.perf_counter()]
        reply = self._prepare(msg, marks)
        marks += [time.perf_counter()] * (4 - len(marks))
        spent = {part: round((b - a) * 1e3, 3) for part, a, b in zip(("release", "inputs", "call"), marks, marks[1:],
                                                                      strict=False)}
        return {**reply, "spent_ms": spent}

    def _prepare(self, msg: dict[str, Any], marks: list[float]) -> dict[str, Any]:
        name = str(msg["case"])
        if msg.get("fresh"):  # called again even where the inputs could be refilled in place
            self.cases.pop(name, None)
        pad = int(msg.get("pad") or 0)
        if pad and not self.graphs and self.device.startswith("cuda"):
            # free the case's inputs and last pad and hand the cached blocks back to the driver,
            # then hold `pad` bytes: the new inputs land at other virtual and physical pages
            # (a captured graph would need its addresses, so graphs keep theirs)
            self.cases.pop(name, None)
            self.pads.pop(name, None)
            torch.cuda.empty_cache()
            self.pads[name] = torch.empty(pad, dtype=torch.uint8, device=self.device)
        marks.append(time.perf_counter())
        if self.harness:
            prepared = _Case(self.harness[name]())
        else:
            case = next(c for c in self.problem.cases if c.name == name)
            args = self.runtime.inputs(case, int(msg["seed"]))
            known = self.cases.get(name)
            if known is not None and _refill(known.args, args):
                return {"refilled": True}  # compiled already; a captured graph stays valid
            call = getattr(self.runtime, self.call)
            prepared = _Case(lambda: call(args), args)
        marks.append(time.perf_counter())
        prepared.last = prepared.run()  # compiles and autotunes, outside any timed batch
        self._synchronize()
        if self.graphs:
            prepared.graph, prepared.last = _capture(prepared.run)
        self.cases[name] = prepared
        return {}

    def cmd_run_batch(self, msg: dict[str, Any]) -> dict[str, Any]:
        if self.pin_before_batch:
            pin_cores(self.pin_before_batch)
            self.pin_before_batch = None
        prepared = self.cases[str(msg["case"])]
        k = max(1, min(int(msg["k"]), MAX_BATCH))
        self._synchronize()
        start = time.perf_counter()
        if msg.get("salt") is not None and prepared.args:
            _salt(prepared.args, int(msg["salt"]))
        events = self._events()
        if prepared.graph is not None:
            for _ in range(k):
                prepared.graph.replay()
        else:
            for _ in range(k):
                prepared.last = prepared.run()
        if events:
            events[1].record()
        committed = output_fingerprint(self._output(prepared))
        self._synchronize()
        self.batches += 1
        reply = {"runner_ms": (time.perf_counter() - start) * 1e3, "fingerprint": committed}
        if events:  # what the GPU's own clock says: evidence beside the judge's figure, never stored as a time
            reply["runner_gpu_ms"] = events[0].elapsed_time(events[1])
        return reply

    def _events(self) -> Any:
        """A started CUDA event pair on a GPU (its second event still to record), else None."""
        if not self.device.startswith("cuda"):
            return None
        pair = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        pair[0].record()
        return pair

    def cmd_save_output(self, msg: dict[str, Any]) -> dict[str, Any]:
        name = str(msg["name"])
        if os.path.basename(name) != name:
            raise ValueError(f"{name!r} is not a plain file name")
        save_file(_to_cpu(self._output(self.cases[str(msg["case"])])), name)
        return {"name": name}

    def _output(self, prepared: _Case) -> Any:
        """The last call's result, with the arguments it writes in place."""
        inplace = [prepared.args[i] for i in self.problem.inplace_outputs if i < len(prepared.args)]
        return (prepared.last, inplace) if inplace else prepared.last

    def cmd_features(self, msg: dict[str, Any]) -> dict[str, Any]:
        """phi (driver registers, static profile), the case for Nsight Compute and the share of
        GPU time in the candidate's own Triton kernels: as the single-process path gave them."""
        slowest = 0 if self.harness else int(msg["slowest"])
        features, case = gpu_features(self.problem, self.runtime, CudaDevice(), str(msg["target"]),
                                      slowest, float(msg["time_ms"]))
        return {"features": features.to_dict(), "ncu_case": case.to_dict(),
                "triton_share": triton_share(self.runtime, self.problem.cases[slowest])}

    def cmd_autotune_picks(self, msg: dict[str, Any]) -> dict[str, Any]:
        return {"picks": autotune.picks([self.runtime.candidate_module])}

    def cmd_pin_autotune(self, msg: dict[str, Any]) -> dict[str, Any]:
        return {"pinned": autotune.pin([self.runtime.candidate_module], dict(msg.get("pins") or {}))}

    def cmd_autotune_compile_only(self, msg: dict[str, Any]) -> dict[str, Any]:
        return {"autotuners": autotune.compile_only(bool(msg.get("on")))}

    def _synchronize(self) -> None:
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()


def _refill(old: list[Any], new: list[Any]) -> bool:
    """Copy `new` inputs into the tensors of `old` (same addresses: a captured graph and the
    bound call keep working); False when they differ in anything but values."""
    if len(old) != len(new):
        return False
    for a, b in zip(old, new, strict=True):
        if isinstance(a, torch.Tensor) != isinstance(b, torch.Tensor):
            return False
        if isinstance(a, torch.Tensor):
            if (a.shape, a.dtype, a.device, a.stride()) != (b.shape, b.dtype, b.device, b.stride()):
                return False
        elif a != b:
            return False
    with torch.no_grad():
        for a, b in zip(old, new, strict=True):
            if isinstance(a, torch.Tensor):
                a.copy_(b)
    if hasattr(old, "seed") and hasattr(new, "seed"):
        old.seed = new.seed
    return True


def _preload_key(msg: dict[str, Any]) -> str:
    """What a preload must match to be taken by `load`: the problem, device, harness seed and
    where the harness's inputs are drawn."""
    text = json.dumps([msg["problem"], str(msg.get("device") or "cpu"), int(msg.get("seed", 0)),
                       bool(msg.get("inputs_on_device"))], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _draw(harness: Any, device: str, seed: int, on_device: bool) -> str:
    """A harness's inputs drawn from `seed` (seeded already): first on the runner's GPU when
    asked, else on the host; where they were drawn."""
    factory = device if on_device and device.startswith("cuda") else None
    return draw_inputs(harness, device, lambda: _seed_everything(seed), factory)


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    numpy.random.seed(seed)
    torch.manual_seed(seed)


SALT_ELEMENTS = 2  # per floating input and batch: cheap, and no output can be computed early


def _salt(args: list[Any], salt: int) -> None:
    overwrite(args, SALT_ELEMENTS, random.Random(salt))


def _capture(run: Callable[[], Any]) -> tuple[Any, Any]:
    """One call captured as a CUDA graph (after a warm-up on a side stream, as torch asks)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        run()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = run()
    graph.replay()
    torch.cuda.synchronize()
    return graph, out


def _to_cpu(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu").clone()
    if isinstance(value, list):
        return [_to_cpu(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_to_cpu(v) for v in value)
    if isinstance(value, dict):
        return {k: _to_cpu(v) for k, v in value.items()}
    return value


def pin_cores(cores: list[int] | None) -> tuple[list[int], str]:
    """Run this process on `cores` only (the measuring core set): (the set in force, why not)."""
    if not cores:
        return sorted(os.sched_getaffinity(0)), ""
    try:
        for tid in os.listdir("/proc/self/task"):  # every thread (torch's pools started earlier)
            os.sched_setaffinity(int(tid), cores)
    except OSError as exc:  # cores this node does not have, or a jail that forbids it
        return sorted(os.sched_getaffinity(0)), f"not pinned to {cores}: {exc.strerror}"
    return sorted(os.sched_getaffinity(0)), ""


def serve_task(payload: dict[str, Any]) -> dict[str, Any]:
    """Sandbox target: serve commands until `close`; returns how many batches ran."""
    started_on = sorted(os.sched_getaffinity(0))
    cores, unpinned = pin_cores(payload.get("cores"))  # whether this process may run there at all
    server = TimingServer()
    server.pinning = {"cores": cores, "unpinned": unpinned}
    if payload.get("cores") and not unpinned:
        # loading, compiling and preparing run on the node's other cores, beside other tasks'
        # work; only batches need the measuring cores, which every runner of the node shares
        pin_cores(started_on)
        server.pin_before_batch = list(payload["cores"])
    with open(payload["commands"], "rb") as commands, open(payload["replies"], "wb", buffering=0) as replies:
        for line in commands:
            msg = json.loads(line)
            if msg.get("cmd") == "close":
                break
            try:
                reply = server.handle(msg)
            except Exception as exc:  # a failing command is an answer, the session goes on
                reply = {"ok": False, "error": f"{type(exc).__name__}: {str(exc)[:1500]}"}
            replies.write(json.dumps(reply, default=repr).encode() + b"\n")
    return {"batches": server.batches, "cores": cores, "unpinned": unpinned}
