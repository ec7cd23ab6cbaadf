"""Parsing Nsight Compute's raw CSV page, and its absence handled as a labelled fallback."""

from __future__ import annotations

import pytest

from kernelband.profile import ncu

# Written for this test in the layout `ncu --csv --page raw` prints: program output and
# ==PROF== lines first, then a header row, a units row and one row per kernel launch.
SAMPLE = '''==PROF== Connected to process 4242 (/usr/bin/python3.11)
candidate ran
==PROF== Profiling "add_kernel" - 0: 0%....50%....100% - 9 passes
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","dram__throughput.avg.pct_of_peak_sustained_elapsed","gpu__time_duration.sum","l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum","l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum","l1tex__throughput.avg.pct_of_peak_sustained_elapsed","launch__registers_per_thread","lts__throughput.avg.pct_of_peak_sustained_elapsed","sm__throughput.avg.pct_of_peak_sustained_elapsed","sm__warps_active.avg.pct_of_peak_sustained_active"
"","","","","","","","","","","","%","usecond","","","%","register/thread","%","%","%"
"0","4242","python3.11","127.0.0.1","add_kernel","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0","82.41","12.54","0","0","35.10","26","40.02","12.73","78.91"
"1","4242","python3.11","127.0.0.1","softmax_kernel","1","7","(256, 1, 1)","(1024, 1, 1)","0","9.0","41.5","1,024.5","12","3","60.2","40","55.5","70.25","n/a"
==PROF== Disconnected from process 4242
'''


def test_parser_reads_every_kernel_with_units() -> None:
    kernels = ncu.parse_ncu_csv(SAMPLE)
    assert [k.name for k in kernels] == ["add_kernel", "softmax_kernel"]
    add = kernels[0].metrics
    assert add["dram_pct"] == 82.41 and add["sm_pct"] == 12.73 and add["l2_pct"] == 40.02
    assert add["registers_per_thread"] == 26 and add["achieved_occupancy_pct"] == 78.91
    assert kernels[0].time_ms == pytest.approx(0.01254)
    soft = kernels[1].metrics
    assert kernels[1].time_ms == pytest.approx(1.0245)  # thousands separator removed
    assert soft["smem_bank_conflicts_ld"] == 12 and "achieved_occupancy_pct" not in soft


def test_parser_without_csv_returns_nothing() -> None:
    assert ncu.parse_ncu_csv("==ERROR== ERR_NVGPUCTRPERM - no permission\n") == []


def test_missing_ncu_is_a_labelled_outcome(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ncu, "find_ncu", lambda: None)
    outcome = ncu.run_ncu(["true"])
    assert not outcome.ok and outcome.reason == "missing" and "Nsight Compute" in outcome.message


def test_counter_permission_refusal_is_recognised(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    fake = tmp_path / "ncu"
    fake.write_text("#!/bin/sh\necho '==ERROR== ERR_NVGPUCTRPERM - The user does not have permission' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(ncu, "find_ncu", lambda: str(fake))
    outcome = ncu.run_ncu(["true"])
    assert outcome.reason == "permission" and "NVreg_RestrictProfilingToAdminUsers" in outcome.message
