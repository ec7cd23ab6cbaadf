"""KernelBand: hardware-aware bandit search that makes Triton GPU kernels faster."""

__version__ = "0.1.0"
