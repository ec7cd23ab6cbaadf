"""Parsing cuobjdump output: resource usage and the instruction-class histogram."""

from __future__ import annotations

from kernelband.profile.sass import (
    classify,
    flops_per_thread,
    global_access_bits,
    instruction_histogram,
    parse_resource_usage,
)

SAMPLE = """
Resource usage:
 Common:
  GLOBAL:0
 Function other_kernel:
  REG:40 STACK:8 SHARED:0 LOCAL:16 CONSTANT[0]:576 TEXTURE:0 SURFACE:0 SAMPLER:0
 Function add:
  REG:26 STACK:0 SHARED:128 LOCAL:0 CONSTANT[0]:576 TEXTURE:0 SURFACE:0 SAMPLER:0

	code for sm_90a
		Function : add
        /*0000*/                   LDC R1, c[0x0][0x28] ;                        /* 0x00000a00ff017b82 */
                                                                                 /* 0x000fe20000000800 */
        /*0180*/              @!P0 LDG.E.128 R16, desc[UR4][R20.64] ;            /* 0x0000000414108981 */
        /*0190*/              @!P0 LDG.E.128 R12, desc[UR4][R22.64] ;            /* 0x00000004160c8981 */
        /*01a0*/              @!P1 LDG.E R4, desc[UR4][R20.64+0x800] ;           /* 0x0008000414049981 */
        /*01b0*/                   LDG.E.U16.CONSTANT R8, desc[UR4][R22.64] ;    /* 0x0008000416089981 */
        /*01d0*/                   FADD R12, R12, R16 ;                          /* 0x000000100c0c7221 */
        /*01e0*/                   FFMA R13, R13, R17, R2 ;                      /* 0x000000110d0d7221 */
        /*0200*/                   HGMMA.64x64x16.F32 R24, gdesc[UR4], RZ ;      /* 0x000000110d0d7221 */
        /*0210*/              @!P0 STG.E.64 desc[UR4][R2.64], R12 ;              /* 0x0001e2000c101d04 */
        /*0220*/                   STL [R1], R5 ;                                /* 0x0001e2000c101d04 */
        /*0230*/                   BRA 0x230 ;                                   /* 0x0001e2000c101d04 */
        /*0240*/                   NOP ;                                         /* 0x0001e2000c101d04 */
"""


def test_resource_usage_of_the_named_function() -> None:
    usage = parse_resource_usage(SAMPLE, "add")
    assert usage is not None
    assert (usage.registers, usage.stack_bytes, usage.shared_bytes, usage.local_bytes) == (26, 0, 128, 0)
    first = parse_resource_usage(SAMPLE)
    assert first is not None and first.registers == 40 and first.local_bytes == 16


def test_histogram_splits_global_accesses_by_width() -> None:
    hist = instruction_histogram(SAMPLE)
    assert hist["LDG.128"] == 2 and hist["LDG.32"] == 1 and hist["LDG.16"] == 1
    assert hist["STG.64"] == 1 and hist["STL"] == 1
    assert hist["WGMMA"] == 1 and hist["FADD"] == 1 and hist["FFMA"] == 1 and hist["BRA"] == 1
    assert hist["total"] == 11  # NOP excluded, the encoding-only lines ignored


def test_classify_ignores_width_like_cache_modifiers() -> None:
    assert classify("LDG.E.LTC128B.128") == "LDG.128"
    assert classify("LDG.E.LTC128B") == "LDG.32"
    assert classify("HMMA.16816.F32") == "HMMA"
    assert classify("IADD3") == "other"


def test_access_width_and_flop_helpers() -> None:
    hist = {"LDG.128": 2, "LDG.32": 2, "FFMA": 3, "FADD": 1}
    assert global_access_bits(hist) == 80.0
    assert global_access_bits({}, "STG") == 0.0
    assert flops_per_thread(hist) == 7


def test_tensor_core_flops_come_from_the_instruction_shape() -> None:
    from kernelband.profile.sass import mma_flops_per_warp, tensor_flops_per_warp

    assert mma_flops_per_warp("HMMA.16816.F32") == 2 * 16 * 8 * 16
    assert mma_flops_per_warp("HMMA.1688.F32.TF32") == 2 * 16 * 8 * 8
    assert mma_flops_per_warp("HGMMA.64x128x16.F32") == 2 * 64 * 128 * 16 // 4
    assert mma_flops_per_warp("FFMA") == 0
    assert tensor_flops_per_warp(SAMPLE) == 2 * 64 * 64 * 16 // 4
