"""Data moved to the host to compute there is weighed like torch work."""

from __future__ import annotations

import torch

from kernelband.runner.host_work import HostWork, host_work_problem


def test_numpy_tolist_and_item_exports_of_inputs_are_counted() -> None:
    x = torch.randn(100)
    with HostWork([x]) as host:
        x.numpy()
        x.tolist()
        for i in range(10):
            x[i].item()
    assert host.elements == 100 + 100 + 10
    assert set(host.ops) == {"numpy", "tolist", "item"}


def test_a_copy_of_an_input_is_still_input_data() -> None:
    x = torch.randn(100)
    with HostWork([x]) as host:
        x.clone().contiguous().reshape(10, 10).tolist()
    assert host.elements == 100


def test_a_result_allocated_for_the_kernel_is_not_input_data() -> None:
    x = torch.randn(100)
    with HostWork([x]) as host:
        out = torch.empty_like(x)
        out.copy_(torch.ones(100))  # stands in for the Triton kernel writing its result
        out.numpy()
        out.tolist()
    assert host.elements == 0


def test_moves_on_the_host_device_are_free() -> None:
    x = torch.randn(50)
    with HostWork([x]) as host:
        x.cpu()
        x.to("cpu")
        x.shape  # noqa: B018 - metadata
    assert host.elements == 0


def test_whole_input_exports_are_a_decoy_small_ones_are_not() -> None:
    host = HostWork()
    host.elements, host.ops = 2000, {"numpy": 2000}
    found = host_work_problem(host, torch_elements=0, inputs=2000, limit=1.0)
    assert found is not None and "numpy" in found
    host.elements, host.ops = 1, {"item": 1}
    assert host_work_problem(host, torch_elements=10, inputs=2000, limit=1.0) is None


def test_host_exports_add_to_torch_work_and_an_allowance_is_subtracted() -> None:
    host = HostWork()
    host.elements, host.ops = 600, {"tolist": 600}
    assert host_work_problem(host, torch_elements=500, inputs=1000, limit=1.0) is not None
    assert host_work_problem(host, torch_elements=500, inputs=1000, limit=1.0, allowance=200) is None
