"""What machine the validation ran on, and the import shims a bare GPU machine needs."""

from __future__ import annotations

import platform
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

# Device names that map onto a KernelBand target (the first match wins).
_TARGET_BY_NAME = (("H200", "h200"), ("H100", "h100"), ("A100", "a100"), ("4090", "rtx4090"))


def target_for_device(name: str) -> str:
    """The KernelBand target of a CUDA device name (`NVIDIA H100 80GB HBM3` -> `h100`)."""
    upper = name.upper()
    for needle, target in _TARGET_BY_NAME:
        if needle in upper:
            return target
    raise ValueError(f"no KernelBand target for device {name!r}; pass --target explicitly")


def stub_missing_litellm() -> bool:
    """Install an inert `litellm` module when it is not installed; True if a stub was put in.

    `kernelband.generate.budget` imports litellm at import time although only the LLM generator
    uses it; the rules generator never touches it, so any attribute access on the stub fails loudly.
    """
    try:
        import litellm  # noqa: F401
    except ImportError:
        stub = types.ModuleType("litellm")

        def _missing(name: str) -> Any:
            raise AttributeError(f"litellm is not installed on this machine (asked for {name}); "
                                 "only the rules generator can run here")

        stub.__getattr__ = _missing  # type: ignore[method-assign]
        sys.modules["litellm"] = stub
        return True
    return False


def install_path_file(paths: list[str]) -> Path | None:
    """Write a .pth file so sandbox children (started with a scrubbed environment) find `paths`."""
    import site

    for directory in site.getsitepackages():
        target = Path(directory) / "kernelband_gpu_validate.pth"
        try:
            target.write_text("\n".join(paths) + "\n")
        except OSError:
            continue
        return target
    return None


def _command(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unavailable ({exc})"
    return (done.stdout or done.stderr).strip()


def describe_environment() -> dict[str, Any]:
    """Device name, driver, torch/triton/python versions, ncu version (read, never assumed)."""
    import torch
    import triton

    info: dict[str, Any] = {
        "python": platform.python_version(), "torch": torch.__version__,
        "triton": triton.__version__, "cuda_available": torch.cuda.is_available(),
        "kernel": platform.release(),
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info.update(device=props.name, capability=f"{props.major}.{props.minor}",
                    multiprocessors=props.multi_processor_count,
                    l2_bytes=int(getattr(props, "L2_cache_size", 0) or 0),
                    memory_gib=round(props.total_memory / 1024**3, 1),
                    torch_cuda=torch.version.cuda)
    info["nvidia_smi"] = _command(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,"
                                   "clocks.mem,temperature.gpu", "--format=csv,noheader"])
    from kernelband.profile.ncu import find_ncu

    ncu = find_ncu()
    info["ncu"] = _command([ncu, "--version"]).splitlines()[-1] if ncu else "not found"
    return info
