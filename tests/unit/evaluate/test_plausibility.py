"""Implausible times are re-measured strictly; times under the physical floor are refused."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kernelband.evaluate.plausibility import floor_ms, gate, implausible_reasons
from kernelband.evaluate.verified_timing import TimingRejected
from kernelband.profile.archs import GPUS
from kernelband.profile.measurement import Measurement

H100 = GPUS["h100"]


def _measured(time_ms: float, ratio: float | None = None, floor: float = 0.0) -> Measurement:
    return Measurement("measured", "cuda events", "H100", "h100", time_ms, {"c": time_ms},
                       paired_ratio=ratio, floors_ms={"c": floor})


def test_floor_is_output_bytes_at_peak_bandwidth() -> None:
    big = 64 * 1024**2 * 4  # 256 MiB of float32, larger than L2: DRAM's 3350 GB/s
    assert floor_ms(big, H100) == pytest.approx(big / 3350e9 * 1e3)
    small = 16 * 1024**2  # fits in L2: the faster L2 figure, so the floor is lower still
    assert floor_ms(small, H100) == pytest.approx(small / (3350e9 * 2.5) * 1e3)


def test_a_16m_element_add_cannot_take_4_microseconds() -> None:
    # the exploit: 0.0042 ms for a 16M-element float32 add (64 MiB written)
    assert floor_ms(16 * 1024**2 * 4, H100) > 0.0042


def test_reasons_name_the_speedup_and_the_floor() -> None:
    assert implausible_reasons(_measured(1.0, ratio=0.5, floor=0.1)) == []
    assert "faster than its parent" in implausible_reasons(_measured(1.0, ratio=0.05))[0]
    assert "physical floor" in implausible_reasons(_measured(0.01, floor=0.02))[0]
    estimate = replace(_measured(0.01, ratio=0.01, floor=0.02), label="estimated")
    assert implausible_reasons(estimate) == []


def test_a_plausible_time_is_kept_without_remeasuring() -> None:
    m = _measured(1.0, ratio=0.5)
    assert gate(m, "f", lambda: pytest.fail("re-measured"))[:2] == (m, "f")


def test_an_implausible_time_is_replaced_by_the_strict_one_and_says_so() -> None:
    strict = _measured(0.9, ratio=0.08)
    m, features, reasons = gate(_measured(0.1, ratio=0.01), "f", lambda: (strict, "strict f"))
    assert m.time_ms == 0.9 and features == "strict f" and reasons
    assert m.method.startswith("strict re-measure") and "every call verified" in m.method


def test_a_strict_time_still_under_the_floor_is_refused() -> None:
    with pytest.raises(TimingRejected) as caught:
        gate(_measured(0.001, floor=0.01), "f", lambda: (_measured(0.001, floor=0.01), "f"))
    assert caught.value.reason == "implausible_time_under_floor"
