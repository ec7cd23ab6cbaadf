"""Static profile without a GPU: compile a captured launch ahead of time for sm_80/89/90 and
read registers, shared/local memory, occupancy and the SASS instruction mix."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from kernelband.profile.archs import ARCH_LIMITS
from kernelband.profile.launches import LaunchRecord
from kernelband.profile.occupancy import Occupancy, theoretical_occupancy
from kernelband.profile.sass import (
    instruction_histogram,
    parse_resource_usage,
    tensor_flops_per_warp,
)
from kernelband.profile.specialize import (
    StaticProfileError,
    as_jit_function,
    deinterpreted,
    specialise,
)

_PASSED_OPTIONS = ("num_ctas", "maxnreg", "enable_fp_fusion")
PROFILER_VERSION = "3"  # bump when what a profile contains changes: old cache entries are ignored
_CUOBJDUMP_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class StaticProfile:
    """Resources and instruction mix of one kernel specialisation compiled for one arch."""

    kernel_name: str
    cc: int
    registers_per_thread: int
    shared_mem_bytes: int
    local_bytes: int  # per thread; non-zero means register spills or local arrays
    stack_bytes: int
    spill_instructions: int  # LDL + STL in the SASS
    num_warps: int
    num_stages: int
    occupancy: Occupancy
    sass: dict[str, int]
    signature: dict[str, str]
    triton_version: str
    compile_s: float
    tensor_flops_per_warp: int = 0  # one pass of the SASS, from the MMA instruction shapes
    cached: bool = False
    label: str = "static"
    source: str = field(default="AOT triton.compile + cuobjdump (no GPU)")

    @property
    def arch(self) -> str:
        return f"sm_{self.cc}"

    @property
    def threads_per_block(self) -> int:
        return self.num_warps * 32

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["arch"] = self.arch
        data["threads_per_block"] = self.threads_per_block
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StaticProfile:
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        fields["occupancy"] = Occupancy(**data["occupancy"])
        return cls(**fields)


def _cuobjdump() -> str:
    import triton

    bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    if bundled.exists():
        return str(bundled)
    found = shutil.which("cuobjdump")
    if not found:
        raise StaticProfileError(
            "cuobjdump not found (neither in triton/backends/nvidia/bin nor on PATH): "
            "install a Triton wheel with the NVIDIA backend or the CUDA toolkit"
        )
    return found


def _metadata_value(metadata: Any, *names: str) -> Any:
    """Read a metadata field whose name differs across Triton versions."""
    for name in names:
        if isinstance(metadata, dict) and name in metadata:
            return metadata[name]
        if hasattr(metadata, name):
            return getattr(metadata, name)
    return None


def _disassemble(cubin: bytes) -> str:
    with tempfile.NamedTemporaryFile(suffix=".cubin") as handle:
        handle.write(cubin)
        handle.flush()
        done = subprocess.run(
            [_cuobjdump(), "-res-usage", "-sass", handle.name],
            capture_output=True, text=True, timeout=_CUOBJDUMP_TIMEOUT_S, check=False,
        )
    if done.returncode != 0:
        raise StaticProfileError(f"cuobjdump failed on the compiled kernel: {done.stderr.strip()[:300]}")
    return done.stdout


@contextmanager
def _fork_exec_subprocesses() -> Iterator[None]:
    """Make subprocess use fork+exec rather than posix_spawn while Triton runs ptxas.

    The sandbox's audit hook allows `subprocess.Popen` of ptxas but refuses the `os.posix_spawn`
    event that CPython emits for `close_fds=False` launches such as Triton's own ptxas call.
    """
    previous = getattr(subprocess, "_USE_POSIX_SPAWN", None)
    if previous is not None:
        setattr(subprocess, "_USE_POSIX_SPAWN", False)  # noqa: B010 - a Final in typeshed
    try:
        yield
    finally:
        if previous is not None:
            setattr(subprocess, "_USE_POSIX_SPAWN", previous)  # noqa: B010


def _ptxas_override(cc: int) -> Path | None:
    """The bundled `ptxas` to use for sm_90 inside a sandbox whose policy does not list
    `ptxas-blackwell` (which Triton 3.9 runs for sm_90), else None (Triton's own choice)."""
    guard = sys.modules.get("kernelband.sandbox.guard")
    if cc < 90 or not bool(getattr(guard, "_state", {}).get("installed")):
        return None
    if "ptxas-blackwell" in getattr(guard, "_ALLOWED_TOOLS", set()):
        return None
    import triton

    bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    return bundled if bundled.exists() else None


@contextmanager
def _sandbox_safe_ptxas(cc: int) -> Iterator[None]:
    """Point Triton's sm_90 ptxas at `_ptxas_override(cc)` for the duration of a compile."""
    override = _ptxas_override(cc)
    if override is None:
        yield
        return
    key = "TRITON_PTXAS_BLACKWELL_PATH"
    previous = os.environ.get(key)
    os.environ[key] = str(override)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = previous


def _compile(record: LaunchRecord, cc: int) -> tuple[Any, Any]:
    import triton
    from triton.backends.compiler import GPUTarget

    jit = as_jit_function(record.fn)
    spec = specialise(record, jit)
    options = {"num_warps": record.num_warps, "num_stages": record.num_stages}
    options.update({k: v for k, v in record.options.items() if k in _PASSED_OPTIONS})
    try:
        with deinterpreted(), _fork_exec_subprocesses(), _sandbox_safe_ptxas(cc):
            source, options = _launch_source(jit, record, spec, cc, options)
            compiled = triton.compile(source, target=GPUTarget("cuda", cc, 32), options=options)
    except Exception as exc:  # compiler errors come in many types; all mean "does not compile"
        raise StaticProfileError(
            f"kernel {record.kernel_name} does not compile for sm_{cc}: {str(exc).strip()[:500]}"
        ) from exc
    return compiled, spec


def _launch_source(jit: Any, record: LaunchRecord, spec: Any, cc: int,
                   options: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """What Triton's own launch of `record` on an sm_`cc` GPU would compile, made by Triton's
    binder: the compile then lands in Triton's cache (the job's) under the key a runner's
    launch of the same arguments looks up, so a GPU node's timing runner loads the kernel
    instead of compiling it while it holds the GPU. Hand-built attributes compile the same
    code under another key (the binder also lists arguments without attributes). Falls back
    to `spec` where the binder's internals differ (another Triton)."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.compiler.compiler import make_backend

    try:
        from triton.runtime.jit import create_function_from_signature

        backend = make_backend(GPUTarget("cuda", cc, 32))
        binder = create_function_from_signature(jit.signature, jit.params, backend)
        bound, specialization, parsed = binder(*record.args.values(), **options)
        parsed, signature, constexprs, attrs = jit._pack_args(backend, dict(options), bound, specialization, parsed)
    except Exception:  # noqa: BLE001 - Triton internals: the hand-built source still profiles
        return ASTSource(jit, spec.signature, constexprs=spec.constexprs, attrs=spec.attrs), options
    return ASTSource(jit, signature, constexprs, attrs), dict(parsed.__dict__)


def _profile_uncached(record: LaunchRecord, cc: int) -> StaticProfile:
    import triton

    started = time.perf_counter()
    compiled, spec = _compile(record, cc)
    text = _disassemble(compiled.asm["cubin"])
    name = _metadata_value(compiled.metadata, "name") or record.kernel_name
    usage = parse_resource_usage(text, name) or parse_resource_usage(text)
    if usage is None:
        raise StaticProfileError(f"cuobjdump printed no resource usage for {name}; check the Triton install")
    # Triton's `shared` is the dynamic shared memory passed at launch; the cubin may declare
    # static shared memory too. On sm_90 cuobjdump's figure includes the 1 KiB the system
    # reserves per block, which the occupancy rules add themselves (checked against
    # CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES and cuOccupancyMaxActiveBlocksPerMultiprocessor).
    meta_smem = int(_metadata_value(compiled.metadata, "shared", "shared_mem") or 0)
    reserved = ARCH_LIMITS[cc].reserved_smem_per_block if cc >= 90 else 0
    smem = meta_smem + max(0, usage.shared_bytes - reserved)
    num_warps = int(_metadata_value(compiled.metadata, "num_warps") or record.num_warps)
    sass = instruction_histogram(text)
    return StaticProfile(
        kernel_name=record.kernel_name,
        cc=cc,
        registers_per_thread=usage.registers,
        shared_mem_bytes=smem,
        local_bytes=usage.local_bytes,
        stack_bytes=usage.stack_bytes,
        spill_instructions=sass.get("LDL", 0) + sass.get("STL", 0),
        num_warps=num_warps,
        num_stages=int(_metadata_value(compiled.metadata, "num_stages") or record.num_stages),
        occupancy=theoretical_occupancy(ARCH_LIMITS[cc], num_warps, usage.registers, smem),
        sass=sass,
        signature=spec.signature,
        triton_version=triton.__version__,
        compile_s=round(time.perf_counter() - started, 4),
        tensor_flops_per_warp=tensor_flops_per_warp(text),
        source=_source_text(cc),
    )


def _source_text(cc: int) -> str:
    override = _ptxas_override(cc)
    base = "AOT triton.compile + cuobjdump (no GPU)"
    return base if override is None else f"{base}; sandbox policy: compiled with {override.name}"


_memory_cache: dict[str, StaticProfile] = {}


def default_cache_dir() -> Path:
    """Next to Triton's cache when one is set (the only place a sandbox child may write)."""
    triton_cache = os.environ.get("TRITON_CACHE_DIR")
    if triton_cache:
        return Path(triton_cache) / "kernelband-static-profile"
    # the settings load pydantic, which sandbox children importing this package never need
    from kernelband.config import get_settings

    return get_settings().data_dir / "cache" / "static_profile"


def cache_key(record: LaunchRecord, cc: int) -> str:
    """(source hash incl. helpers, target, specialisation, launch options) as one digest."""
    import triton

    with deinterpreted():
        jit = as_jit_function(record.fn)
        spec = specialise(record, jit)
        source_key = jit.cache_key
    options = sorted((k, repr(v)) for k, v in record.options.items() if k in _PASSED_OPTIONS)
    text = "|".join(
        [PROFILER_VERSION, _profiler_digest(), source_key, triton.__version__, f"sm_{cc}", spec.key(),
         f"w{record.num_warps}s{record.num_stages}", repr(options), str(_ptxas_override(cc)),
         _compiler_key(record, cc)]
    )
    return hashlib.sha256(text.encode()).hexdigest()


_PROFILER_MODULES = ("static.py", "sass.py", "occupancy.py", "archs.py", "specialize.py")


@functools.lru_cache(maxsize=1)
def _profiler_digest() -> str:
    """A digest of the code that decides what a profile holds, so an edit that forgets to bump
    PROFILER_VERSION still retires the entries the old code wrote."""
    here = Path(__file__).parent
    digest = hashlib.sha256()
    for name in _PROFILER_MODULES:
        digest.update((here / name).read_bytes())
    return digest.hexdigest()[:16]


def _compiler_key(record: LaunchRecord, cc: int) -> str:
    """What Triton itself keys a compile on besides the source: the resolved options (including
    environment knobs such as TRITON_DEFAULT_FP_FUSION), the ptxas version and the
    cache-invalidating TRITON_* variables. Without it, a profile compiled under one setting was
    served under another."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import make_backend

    options = {"num_warps": record.num_warps, "num_stages": record.num_stages}
    options.update({k: v for k, v in record.options.items() if k in _PASSED_OPTIONS})
    try:
        with _fork_exec_subprocesses(), _sandbox_safe_ptxas(cc):
            backend = make_backend(GPUTarget("cuda", cc, 32))
            parts = [backend.hash(), backend.parse_options(dict(options)).hash()]
    except Exception as exc:  # noqa: BLE001 - key what we can; the compile reports real errors
        parts = [f"backend unavailable: {type(exc).__name__}"]
    return "|".join([*parts, repr(sorted(_invalidating_env().items()))])


def _invalidating_env() -> dict[str, str]:
    """The TRITON_* variables Triton's own compile cache is keyed on (those that are set)."""
    try:
        from triton._C.libtriton import get_cache_invalidating_env_vars
    except ImportError:  # older layouts: fall back to every TRITON_ variable except paths
        return {k: v for k, v in os.environ.items()
                if k.startswith("TRITON_") and not k.endswith(("_DIR", "_PATH")) and k != "TRITON_INTERPRET"}
    return {str(k): str(v) for k, v in get_cache_invalidating_env_vars().items()}


def static_profile(record: LaunchRecord, cc: int, cache_dir: Path | None = None) -> StaticProfile:
    """The static profile of one launch for compute capability `cc` (80, 89 or 90), cached."""
    if cc not in ARCH_LIMITS:
        raise StaticProfileError(f"no limits for sm_{cc}: use one of {sorted(ARCH_LIMITS)}")
    key = cache_key(record, cc)
    if key in _memory_cache:
        return replace(_memory_cache[key], cached=True)
    path = (cache_dir or default_cache_dir()) / f"{key}.json"
    if path.exists():
        try:
            profile = StaticProfile.from_dict(json.loads(path.read_text()))
            _memory_cache[key] = profile
            return replace(profile, cached=True)
        except (ValueError, KeyError, TypeError):
            path.unlink(missing_ok=True)  # a stale or torn cache file: recompute it
    profile = _profile_uncached(record, cc)
    _memory_cache[key] = profile
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{time.monotonic_ns()}.tmp")
    tmp.write_text(json.dumps(profile.to_dict()))
    tmp.replace(path)  # atomic, so a concurrent reader never sees half a file
    return profile


def clear_memory_cache() -> None:
    """Forget in-memory profiles (the disk cache stays)."""
    _memory_cache.clear()
