"""Nsight Compute: run `ncu` time-boxed (launching a command, or attaching to a waiting
process) and parse its raw CSV page."""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from typing import Any

# metric -> short name used in Features and reports
METRICS: dict[str, str] = {
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_pct",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed": "l2_pct",
    "l1tex__throughput.avg.pct_of_peak_sustained_elapsed": "l1_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
    "gpu__time_duration.sum": "time",
    "launch__registers_per_thread": "registers_per_thread",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": "smem_bank_conflicts_ld",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum": "smem_bank_conflicts_st",
}
_TIME_TO_MS = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0, "msecond": 1.0,
               "s": 1e3, "second": 1e3}
_CANDIDATE_PATHS = ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/ncu")
MISSING_MESSAGE = "ncu not found on PATH: install Nsight Compute"


@dataclass(frozen=True)
class NcuKernel:
    """Metrics of one profiled kernel launch (`time_ms` converted from the reported unit)."""

    name: str
    metrics: dict[str, float]

    @property
    def time_ms(self) -> float | None:
        return self.metrics.get("time_ms")


@dataclass(frozen=True)
class NcuOutcome:
    """What an ncu run gave: kernels, or why there are none (`missing`, `permission`, ...)."""

    ok: bool
    kernels: list[NcuKernel] = field(default_factory=list)
    reason: str = ""
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NcuOutcome:
        kernels = [NcuKernel(k["name"], dict(k["metrics"])) for k in data.get("kernels", [])]
        return cls(bool(data["ok"]), kernels, str(data.get("reason", "")), str(data.get("message", "")))


def find_ncu() -> str | None:
    """Path of the `ncu` binary, or None."""
    found = shutil.which("ncu")
    if found:
        return found
    return next((p for p in _CANDIDATE_PATHS if os.access(p, os.X_OK)), None)


def _number(text: str) -> float | None:
    cleaned = text.strip().replace(",", "")
    if cleaned in ("", "n/a", "N/A"):
        return None
    try:
        return float(cleaned)
    except ValueError:
        return None


def parse_ncu_csv(text: str) -> list[NcuKernel]:
    """Kernels from `ncu --csv --page raw` output (program output and ==PROF== lines skipped)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header, units, body = rows[0], rows[1] if len(rows) > 1 else [], rows[2:]
    if units and units[0].strip():  # some versions print no units row
        body, units = rows[1:], []
    kernels = []
    for row in body:
        if len(row) != len(header):
            continue
        record = dict(zip(header, row, strict=True))
        unit_of = dict(zip(header, units, strict=False))
        metrics: dict[str, float] = {}
        for metric, short in METRICS.items():
            value = _number(record.get(metric, ""))
            if value is None:
                continue
            if short == "time":
                metrics["time_ms"] = value * _TIME_TO_MS.get(unit_of.get(metric, "ns").strip(), 1e-6)
            else:
                metrics[short] = value
        kernels.append(NcuKernel(record.get("Kernel Name", "?"), metrics))
    return kernels


def signature(outcome: NcuOutcome) -> tuple[float, float, float] | None:
    """h (SM, DRAM, L2 % of peak) of the slowest profiled kernel, or None without kernels."""
    if not outcome.ok or not outcome.kernels:
        return None
    m = max(outcome.kernels, key=lambda k: k.time_ms or 0.0).metrics
    return (m.get("sm_pct", 0.0), m.get("dram_pct", 0.0), m.get("l2_pct", 0.0))


def _frontend_args(ncu: str, kernel_regex: str | None) -> list[str]:
    # --clock-control none: measure the card as it is; never lock or change its clocks.
    argv = [ncu, "--csv", "--page", "raw", "--clock-control", "none", "--metrics", ",".join(METRICS)]
    return argv + (["--kernel-name", f"regex:{kernel_regex}"] if kernel_regex else [])


def run_ncu(command: list[str], timeout_s: float = 120.0, kernel_regex: str | None = None) -> NcuOutcome:
    """Profile every kernel `command` launches; never raises for ncu's own failures."""
    ncu = find_ncu()
    if ncu is None:
        return NcuOutcome(False, reason="missing", message=MISSING_MESSAGE)
    return _run_frontend(_frontend_args(ncu, kernel_regex) + ["--target-processes", "all"] + command,
                         timeout_s)


def attach_ncu(timeout_s: float, kernel_regex: str | None = None,
               env: dict[str, str] | None = None) -> NcuOutcome:
    """Profile the process on this host (network namespace) that waits for a profiler.

    The process was started under `ncu --mode=launch` and stopped at its first CUDA call; this
    session profiles it until it exits. No such process yet: an `exit:` outcome, try again.
    """
    ncu = find_ncu()
    if ncu is None:
        return NcuOutcome(False, reason="missing", message=MISSING_MESSAGE)
    argv = _frontend_args(ncu, kernel_regex) + ["--mode=attach", "--hostname", "127.0.0.1"]
    return _run_frontend(argv, timeout_s, env)


def _run_frontend(argv: list[str], timeout_s: float, env: dict[str, str] | None = None) -> NcuOutcome:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False,
                              env=env)
    except subprocess.TimeoutExpired:
        return NcuOutcome(False, reason="timeout", message=f"ncu took longer than {timeout_s:.0f}s")
    except OSError as exc:  # includes a sandbox policy that refuses to start ncu
        return NcuOutcome(False, reason="refused", message=f"ncu could not be started: {exc}")
    output = done.stdout + "\n" + done.stderr
    if "ERR_NVGPUCTRPERM" in output:
        return NcuOutcome(False, reason="permission", message=(
            "ncu may not read GPU performance counters (ERR_NVGPUCTRPERM): run as root or set "
            "NVreg_RestrictProfilingToAdminUsers=0 for the nvidia driver"))
    kernels = parse_ncu_csv(done.stdout)
    if not kernels:
        return NcuOutcome(False, reason=f"exit:{done.returncode}", message=output.strip()[-500:])
    return NcuOutcome(True, kernels)
