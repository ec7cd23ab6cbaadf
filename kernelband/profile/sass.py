"""Parse `cuobjdump -res-usage -sass` output: resource usage and an instruction-class histogram."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

_RES_LINE = re.compile(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)")
_FUNCTION = re.compile(r"^\s*Function\s*:?\s*(\S+?):?\s*$")
_INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;", re.IGNORECASE)
_PREDICATE = re.compile(r"^@!?U?P[T0-9]+\s+")

# Width of a global access from its opcode modifiers; no width modifier means 32 bits.
_WIDTH_MODIFIERS = {"U8": 8, "S8": 8, "U16": 16, "S16": 16, "64": 64, "128": 128}

# Opcode (first dotted part) -> histogram class. LDG/STG are split by width separately.
_CLASSES = {
    "LDS": "LDS", "STS": "STS", "LDSM": "LDSM", "LDGSTS": "LDGSTS",
    "UTMALDG": "TMA", "UTMASTG": "TMA", "UBLKCP": "TMA",
    "FFMA": "FFMA", "FMUL": "FMUL", "FADD": "FADD",
    "HFMA2": "HFMA2", "HADD2": "HADD2", "HMUL2": "HMUL2",
    "HMMA": "HMMA", "HGMMA": "WGMMA", "IMMA": "IMMA", "MUFU": "MUFU",
    "SHFL": "SHFL", "BAR": "BAR", "BRA": "BRA",
    "LDL": "LDL", "STL": "STL", "ATOM": "ATOM", "ATOMG": "ATOM", "RED": "ATOM", "REDG": "ATOM",
}
FLOP_WEIGHTS = {"FFMA": 2, "FMUL": 1, "FADD": 1, "HFMA2": 4, "HADD2": 2, "HMUL2": 2}


@dataclass(frozen=True)
class ResourceUsage:
    """What ptxas allocated for one function: registers/thread, stack, shared and local bytes."""

    registers: int
    stack_bytes: int
    shared_bytes: int
    local_bytes: int


def parse_resource_usage(text: str, function: str | None = None) -> ResourceUsage | None:
    """The resource line of `function` (or of the first function) in `cuobjdump -res-usage`."""
    current: str | None = None
    for line in text.splitlines():
        named = _FUNCTION.match(line)
        if named:
            current = named.group(1)
            continue
        found = _RES_LINE.search(line)
        if found and (function is None or current == function):
            reg, stack, shared, local = (int(g) for g in found.groups())
            return ResourceUsage(reg, stack, shared, local)
    return None


def classify(opcode: str) -> str:
    """The histogram class of one SASS opcode such as `LDG.E.128` or `HGMMA.64x64x16.F32`."""
    parts = opcode.split(".")
    head = parts[0]
    if head in ("LDG", "STG"):
        width = next((_WIDTH_MODIFIERS[p] for p in parts[1:] if p in _WIDTH_MODIFIERS), 32)
        return f"{head}.{width}"
    return _CLASSES.get(head, "other")


def instruction_histogram(text: str) -> dict[str, int]:
    """Counts per instruction class over every SASS instruction in the text, plus `total`."""
    counts: Counter[str] = Counter()
    for line in text.splitlines():
        found = _INSTRUCTION.match(line)
        if not found:
            continue
        body = _PREDICATE.sub("", found.group(1))
        opcode = body.split()[0] if body.split() else ""
        if not opcode or opcode == "NOP":
            continue
        counts[classify(opcode)] += 1
        counts["total"] += 1
    return dict(sorted(counts.items()))


_GMMA_SHAPE = re.compile(r"^HGMMA\.(\d+)x(\d+)x(\d+)")
_MMA_SHAPE = re.compile(r"^HMMA\.(16|8)(8)(\d+)")


def mma_flops_per_warp(opcode: str) -> int:
    """FLOPs one warp's tensor-core instruction performs, from its shape (0 for other opcodes).

    HMMA.16816 is m16 n8 k16 per warp; HGMMA.64x128x16 is shared by the 4 warps of a warpgroup.
    """
    found = _GMMA_SHAPE.match(opcode)
    if found:
        m, n, k = (int(g) for g in found.groups())
        return 2 * m * n * k // 4
    found = _MMA_SHAPE.match(opcode)
    if found:
        m, n, k = (int(g) for g in found.groups())
        return 2 * m * n * k
    return 0


def tensor_flops_per_warp(text: str) -> int:
    """Sum of `mma_flops_per_warp` over every SASS instruction in the text."""
    total = 0
    for line in text.splitlines():
        found = _INSTRUCTION.match(line)
        if found:
            body = _PREDICATE.sub("", found.group(1)).split()
            total += mma_flops_per_warp(body[0]) if body else 0
    return total


def global_access_bits(histogram: dict[str, int], kind: str = "LDG") -> float:
    """Mean width in bits of the global loads (`LDG`) or stores (`STG`); 0 when there are none."""
    widths = {int(k.split(".")[1]): v for k, v in histogram.items() if k.startswith(f"{kind}.")}
    count = sum(widths.values())
    return sum(w * n for w, n in widths.items()) / count if count else 0.0


def flops_per_thread(histogram: dict[str, int]) -> int:
    """Static (loop-unaware) non-tensor-core FLOPs one thread issues."""
    return sum(FLOP_WEIGHTS[k] * histogram.get(k, 0) for k in FLOP_WEIGHTS)
