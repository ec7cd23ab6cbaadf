"""Which device sandbox children use, decided without touching CUDA in this process."""

from __future__ import annotations

import os


def detect_device() -> str:
    """`cuda` on a GPU node, else `cpu`; KERNELBAND_DEVICE overrides (never initialises CUDA)."""
    forced = os.environ.get("KERNELBAND_DEVICE", "").strip()
    if forced:
        return forced
    return "cuda" if os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia0") else "cpu"
