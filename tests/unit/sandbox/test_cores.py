"""Which cores measure: one per GPU of the host under `auto`, never one core for two GPUs."""

from __future__ import annotations

import pytest

from kernelband.sandbox.cores import gpu_index, measuring_cores, other_cores

SIXTEEN = list(range(16))


def test_a_single_gpu_node_measures_on_its_last_core_and_runs_the_rest_elsewhere() -> None:
    measuring = measuring_cores("auto", "cuda", available=SIXTEEN, gpus=1, index=0)
    assert measuring == (15,)
    assert other_cores(measuring, "auto", available=SIXTEEN, gpus=1) == tuple(range(15))


def test_two_workers_of_a_two_gpu_host_measure_on_cores_of_their_own() -> None:
    cores = list(range(32))
    first = measuring_cores("auto", "cuda", available=cores, gpus=2, index=0)
    second = measuring_cores("auto", "cuda", available=cores, gpus=2, index=1)
    assert (first, second) == ((31,), (30,))
    # neither worker's compiles and checks run on the other's measuring core
    assert other_cores(first, "auto", available=cores, gpus=2) == tuple(range(30))
    assert other_cores(second, "auto", available=cores, gpus=2) == tuple(range(30))


def test_a_worker_with_a_mask_of_its_own_measures_inside_it() -> None:
    mask = list(range(16, 32))
    assert measuring_cores("auto", "cuda", available=mask, gpus=2, index=1) == (30,)


def test_too_few_cores_for_one_per_gpu_share_the_last_one_and_cpu_nodes_do_not_pin() -> None:
    assert measuring_cores("auto", "cuda", available=[0, 1, 2, 3], gpus=4, index=2) == (3,)
    assert measuring_cores("auto", "cuda", available=[0, 1], gpus=1, index=0) == ()
    assert measuring_cores("auto", "cpu", available=SIXTEEN, gpus=0, index=0) == ()
    assert measuring_cores("none", "cuda", available=SIXTEEN, gpus=2, index=1) == ()


def test_an_explicit_list_is_taken_as_written() -> None:
    assert measuring_cores("4-5", "cuda", available=SIXTEEN, gpus=2, index=1) == (4, 5)
    assert other_cores((4, 5), "4-5", available=list(range(8))) == (0, 1, 2, 3, 6, 7)


@pytest.mark.parametrize(("visible", "index"), [("1", 1), ("3,0", 3), ("", 0),
                                                 ("GPU-5e1f2c3a-aaaa", 0)])
def test_the_gpu_index_is_the_first_visible_device_when_it_is_a_number(visible: str, index: int) -> None:
    assert gpu_index(visible) == index
