"""Plain values that cross the sandbox boundary: limits, results, the scrubbed environment."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field
from typing import Any

from kernelband.sandbox.cores import measuring_cores, other_cores
from kernelband.sandbox.device import detect_device
from kernelband.sandbox.secrets import SECRET_NAME, scrub_secrets
from kernelband.sandbox.settings import node_settings

# Harmless basics a Python process needs; anything else is dropped. PYTHONPATH: children import
# the same kernelband as the parent (a checkout run with PYTHONPATH, not the installed copy).
# The NVLink-multicast switches stay as the node set them: a shared multi-GPU host may require
# multicast off in every process (NCCL_NVLS_ENABLE=0 and the like).
KEPT_NAMES = ("PATH", "PYTHONPATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM", "CUDA_VISIBLE_DEVICES",
              "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "CUDA_HOME", "TRITON_PTXAS_PATH",
              "KERNELBAND_DEVICE", "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
              "NVSHMEM_DISABLE_NVLS")


def triton_caches_root() -> str:
    """The folder of the node's Triton caches: one per job (`SandboxLimits.cache_scope`), and a
    shared one for runs outside any job. A jailed run sees only its own."""
    return os.path.join(tempfile.gettempdir(), "kernelband-triton-caches")


def default_triton_cache_dir() -> str:
    """The cache of runs outside any job (a problem's load, a CLI check): its kernels are
    compiled once per node rather than once per run."""
    return os.path.join(triton_caches_root(), "shared")


def triton_cache_dir(limits: SandboxLimits) -> str:
    """The run's Triton cache: its job's own, so that no run reads or plants what another job's
    runs compiled (a compiled launcher is native code the next run would load)."""
    if not limits.cache_scope:
        return default_triton_cache_dir()
    if not _SCOPE.fullmatch(limits.cache_scope):
        raise ValueError(f"cache_scope {limits.cache_scope!r}: letters, digits, '-' and '_' only")
    return os.path.join(triton_caches_root(), f"job-{limits.cache_scope}")


_SCOPE = re.compile(r"[A-Za-z0-9_-]{1,64}")


# The limits a job may set for its own sandbox runs (POST /v1/jobs `limits`, the CLI's
# --run-limit / --compile-limit / --config-compile-limit): the job's name -> SandboxLimits field.
JOB_LIMITS = {"run_s": "wall_s", "compile_s": "compile_s", "config_compile_s": "config_compile_s"}
_JOB_LIMITS: ContextVar[dict[str, float] | None] = ContextVar("kernelband_job_limits", default=None)
_JOB_SCOPE: ContextVar[str] = ContextVar("kernelband_job_cache_scope", default="")


def job_limit_fields(limits: Mapping[str, Any] | None) -> dict[str, float]:
    """A job's limits as SandboxLimits fields; unset (None) keys are left to the settings."""
    unknown = sorted(set(limits or {}) - set(JOB_LIMITS))
    if unknown:
        raise ValueError(f"unknown sandbox limits {unknown}; use {', '.join(JOB_LIMITS)}")
    return {JOB_LIMITS[k]: float(v) for k, v in (limits or {}).items() if v is not None}


@contextmanager
def job_limits(limits: Mapping[str, Any] | None, job: int | str | None = None) -> Iterator[None]:
    """Within, `SandboxLimits.from_settings` applies the job's limits over the settings and
    gives every run the job's own Triton cache (`job`, its id): a worker wraps each task of a
    job in it, the API and CLI the loading of its problem (no job yet: the shared cache)."""
    token = _JOB_LIMITS.set(job_limit_fields(limits))
    scope = _JOB_SCOPE.set("" if job is None else str(job))
    try:
        yield
    finally:
        _JOB_SCOPE.reset(scope)
        _JOB_LIMITS.reset(token)


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one sandboxed run. `memory_bytes` is enforced by an RSS watchdog."""

    wall_s: float = 60.0  # run time; with compile_s > 0 the child counts compilation apart
    compile_s: float = 0.0  # Triton compilation and autotuning, on top of wall_s (0: in wall_s)
    # an autotune config still compiling this long is left out of its round (0: no limit)
    config_compile_s: float = 0.0
    cpu_s: int = 120
    memory_bytes: int = 8 * 1024**3
    max_files: int = 256
    max_procs: int = 64
    max_file_bytes: int = 2 * 1024**3
    max_result_bytes: int = 64 * 1024 * 1024
    interpret: bool = False  # set TRITON_INTERPRET=1 (CPU device) in the child
    network: bool = False  # False: a private network namespace where the OS permits it (jailed: always)
    audit: bool = True  # install the runtime audit hook (writes, sockets, processes)
    warm: bool = True  # fork from the pre-imported zygote; False: a fresh interpreter
    # fork from the zygote that `ncu --mode=launch` started, loopback up in the child's network
    # namespace so an `ncu --mode=attach` session there can profile it (kernelband/profile/ncu_pass.py)
    profiled: bool = False
    user: str = ""  # run as this user when the service runs as root (kernelband/sandbox/privileges.py)
    # "jail", "weak" or "unjailed" (kernelband/sandbox/jail.py); "": KERNELBAND_SANDBOX_ISOLATION
    isolation: str = ""
    extra_env: dict[str, str] = field(default_factory=dict)
    # the cores the child runs on (empty: this process's); a GPU node keeps its measuring
    # cores for the timing runners (kernelband/sandbox/cores.py)
    cores: tuple[int, ...] = ()
    # whose Triton cache the run uses (a job id; "": the shared one of runs outside any job)
    cache_scope: str = ""

    @classmethod
    def from_settings(cls, **overrides: Any) -> SandboxLimits:
        """Limits from the service Settings, then the current job's (`job_limits`), then
        keyword overrides."""
        s = node_settings()
        values: dict[str, Any] = {
            "wall_s": s.sandbox_interpret_timeout_s if overrides.get("interpret") else s.sandbox_timeout_s,
            "compile_s": s.sandbox_compile_s,
            "config_compile_s": s.sandbox_config_compile_s,
            "cpu_s": s.sandbox_cpu_s,
            "max_files": s.sandbox_max_files,
            "max_procs": s.sandbox_max_procs,
            "memory_bytes": s.sandbox_memory_bytes,
            "max_file_bytes": s.sandbox_max_file_bytes,
            "warm": s.sandbox_warm_pool,
            "user": s.sandbox_user,
            "isolation": s.sandbox_isolation,
            "cores": other_cores(measuring_cores(s.measure_cores, detect_device()), s.measure_cores),
        }
        values["cache_scope"] = _JOB_SCOPE.get()
        values.update(_JOB_LIMITS.get() or {})
        values.update(overrides)
        # CPU seconds follow the wall budgets (torch may keep two cores busy)
        values["cpu_s"] = max(int(values["cpu_s"]), int(2 * (values["wall_s"] + values["compile_s"])))
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class SandboxResult:
    """What a sandboxed run produced: the target's JSON value, or why there is none."""

    ok: bool
    value: Any = None
    reason: str = ""  # "", timeout, memory_limit, cpu_limit, crashed:SIGSEGV, exit:3, ...
    message: str = ""
    wall_s: float = 0.0
    stderr_tail: str = ""
    warm: bool = False
    network_isolated: bool | None = None
    collected: Any = field(default=None, compare=False, repr=False)  # run_sandboxed's collect()

    def __post_init__(self) -> None:
        """Message and stderr go back to teams (API answers, events): however a result is built,
        they carry no secret value this process holds (kernelband/sandbox/secrets.py)."""
        object.__setattr__(self, "message", scrub_secrets(self.message))
        object.__setattr__(self, "stderr_tail", scrub_secrets(self.stderr_tail))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SandboxResult:
        return cls(**data)


def _package_root() -> str:
    """The folder holding the `kernelband` package this module belongs to."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def scrubbed_env(limits: SandboxLimits, workdir: str) -> dict[str, str]:
    """The child's environment: basics only, no secrets, HOME inside the private temp dir."""
    env = {k: v for k, v in os.environ.items() if k in KEPT_NAMES and not SECRET_NAME.search(k)}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env["HOME"] = workdir
    env["TMPDIR"] = workdir
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONHASHSEED"] = "0"
    env["TRITON_CACHE_DIR"] = triton_cache_dir(limits)
    # Autotune choices are kept in that cache, keyed by the kernel's source, the configs and the
    # arguments' tuning key: two imports of the same kernel (the original as reference and as
    # candidate) run the same config, and a problem's later children skip re-benchmarking.
    # Without it each import picks whichever config timed faster, and a kernel whose result
    # depends on its config disagrees with itself. (The interpreter never caches: no effect.)
    env["TRITON_CACHE_AUTOTUNING"] = "1"
    # the child imports the same kernelband as this process (a checkout, not another install)
    env["PYTHONPATH"] = _package_root()
    if limits.interpret:
        env["TRITON_INTERPRET"] = "1"
    for key, value in limits.extra_env.items():
        if not SECRET_NAME.search(key):
            env[key] = value
    return env
