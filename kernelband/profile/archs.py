"""Per-architecture limits (occupancy) and peak figures (cost model), each with its source."""

from __future__ import annotations

from dataclasses import dataclass

# Occupancy limits come from the CUDA C++ Programming Guide, "Features and Technical
# Specifications", table "Technical Specifications per Compute Capability" (CUDA 12.x), and
# the register/shared-memory allocation rules of the CUDA Occupancy Calculator
# (cuda_occupancy.h in the CUDA toolkit).
GUIDE = "CUDA C++ Programming Guide, Technical Specifications per Compute Capability"
OCC_CALC = "CUDA Occupancy Calculator (cuda_occupancy.h) allocation rules"


@dataclass(frozen=True)
class ArchLimits:
    """What one SM of a compute capability can hold at once."""

    cc: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    regs_per_sm: int
    max_regs_per_thread: int
    reg_alloc_unit: int  # registers, allocated per warp
    sub_partitions: int  # register file is split between this many schedulers
    smem_per_sm: int  # bytes, the largest carve-out
    max_smem_per_block: int  # bytes, opt-in maximum
    smem_alloc_unit: int  # bytes
    reserved_smem_per_block: int  # bytes the runtime keeps per block (CUDA >= 11)
    max_threads_per_block: int = 1024
    warp_size: int = 32
    source: str = f"{GUIDE}; {OCC_CALC}"


ARCH_LIMITS: dict[int, ArchLimits] = {
    80: ArchLimits(80, 64, 32, 65536, 255, 256, 4, 164 * 1024, 163 * 1024, 128, 1024),
    89: ArchLimits(89, 48, 24, 65536, 255, 256, 4, 100 * 1024, 99 * 1024, 128, 1024),
    90: ArchLimits(90, 64, 32, 65536, 255, 256, 4, 228 * 1024, 227 * 1024, 128, 1024),
}


@dataclass(frozen=True)
class GpuSpec:
    """Peak figures of one GPU product, for the roofline estimate."""

    name: str
    cc: int
    sms: int
    boost_clock_ghz: float
    dram_gbps: float  # GB/s
    fp32_tflops: float  # non-tensor FP32
    tensor_fp16_tflops: float  # dense, FP32 accumulate
    l2_bytes: int
    source: str
    # No vendor figure exists for L2 bandwidth; it is assumed to be this multiple of DRAM.
    l2_to_dram_bw_ratio: float = 2.5

    @property
    def limits(self) -> ArchLimits:
        return ARCH_LIMITS[self.cc]


GPUS: dict[str, GpuSpec] = {
    "a100": GpuSpec(
        "NVIDIA A100-SXM4-80GB", 80, 108, 1.41, 2039.0, 19.5, 312.0, 40 * 1024**2,
        "NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB) and Ampere GA100 whitepaper",
    ),
    "rtx4090": GpuSpec(
        "NVIDIA GeForce RTX 4090", 89, 128, 2.52, 1008.0, 82.6, 165.2, 72 * 1024**2,
        "NVIDIA Ada Lovelace GPU architecture whitepaper (AD102, RTX 4090)",
    ),
    "h100": GpuSpec(
        "NVIDIA H100 SXM5 80GB", 90, 132, 1.98, 3350.0, 66.9, 989.4, 50 * 1024**2,
        "NVIDIA H100 Tensor Core GPU datasheet (SXM5) and Hopper whitepaper",
    ),
    "h200": GpuSpec(
        "NVIDIA H200 SXM 141GB", 90, 132, 1.98, 4800.0, 66.9, 989.4, 50 * 1024**2,
        "NVIDIA H200 Tensor Core GPU datasheet (SXM)",
    ),
}

# The `cpu` target has no GPU of its own: its estimate is for this reference GPU.
DEFAULT_REFERENCE_GPU = "h100"
TARGETS: tuple[str, ...] = ("a100", "rtx4090", "h100", "h200", "cpu")


class UnknownTargetError(ValueError):
    """A target name that is not one of TARGETS."""


def resolve_target(target: str, reference_gpu: str = DEFAULT_REFERENCE_GPU) -> GpuSpec:
    """The GPU whose figures apply to `target` (`cpu` maps to the reference GPU)."""
    name = reference_gpu if target == "cpu" else target
    if name not in GPUS:
        raise UnknownTargetError(
            f"unknown target {target!r}: use one of {', '.join(TARGETS)}"
            + (f" (reference GPU {reference_gpu!r} is not one of {', '.join(GPUS)})" if target == "cpu" else "")
        )
    return GPUS[name]


def target_for_capability(major: int, minor: int) -> str:
    """The target name closest to a device's compute capability (for labels on a GPU node)."""
    cc = major * 10 + minor
    return {80: "a100", 89: "rtx4090", 90: "h100"}.get(cc, "h100" if cc >= 90 else "a100")
