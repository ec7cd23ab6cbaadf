"""The committed lock agrees with pyproject.toml and with the environment `make install` made.

requirements/lock.txt pins every package (dev tools, litellm and the CPU torch included);
requirements/service.txt (the container image) and requirements/node.txt (GPU workers) are
subsets at the same versions. After changing a dependency
in pyproject.toml, run `make lock`.
"""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / "requirements" / "lock.txt"
NODE_LOCK = REPO / "requirements" / "node.txt"
SERVICE_LOCK = REPO / "requirements" / "service.txt"
TORCH_CPU = REPO / "requirements" / "torch-cpu.in"
KEPT_BY_GPU_NODES = {"torch", "triton"}  # a GPU node brings its own CUDA builds
FIX = "run `make lock` and commit requirements/"


def pins(path: Path) -> dict[str, Version]:
    """name -> exact version of every `name==version` line of a pip-compile output."""
    found: dict[str, Version] = {}
    for line in path.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9._-]+)==(\S+)", line)
        if match:
            found[canonicalize_name(match[1])] = Version(match[2])
    return found


def declared(extras: bool = True) -> list[Requirement]:
    """pyproject's dependencies (and every extra's), plus the CPU torch the lock installs."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    lines = list(project["dependencies"])
    if extras:
        lines += [dep for group in project["optional-dependencies"].values() for dep in group]
        lines += [ln for ln in TORCH_CPU.read_text().splitlines() if ln and not ln.startswith("#")]
    return [Requirement(line) for line in lines]


def unsatisfied(requirements: list[Requirement], locked: dict[str, Version]) -> list[str]:
    problems = []
    for req in requirements:
        version = locked.get(canonicalize_name(req.name))
        if version is None:
            problems.append(f"{req} is not in the lock")
        elif not req.specifier.contains(version, prereleases=True):
            problems.append(f"{req} but the lock pins {version}")
    return problems


def test_every_declared_dependency_is_locked_at_a_version_it_accepts() -> None:
    problems = unsatisfied(declared(), pins(LOCK))
    assert not problems, f"pyproject.toml and {LOCK.name} disagree: {problems}; {FIX}"


@pytest.mark.parametrize("subset", [SERVICE_LOCK, NODE_LOCK], ids=lambda p: p.name)
def test_the_image_and_gpu_node_locks_pin_the_same_versions(subset: Path) -> None:
    locked, pinned = pins(LOCK), pins(subset)
    assert not unsatisfied(declared(extras=False), pinned), FIX
    differing = {name: (pinned[name], locked.get(name)) for name in pinned
                 if pinned[name] != locked.get(name)}
    assert not differing, f"{subset.name} and lock.txt pin different versions: {differing}; {FIX}"
    assert not {"pytest", "mypy", "torch"} & set(pinned), "no dev tools; torch is the node's own"


def test_gpu_only_workers_install_without_litellm() -> None:
    assert "litellm" in pins(SERVICE_LOCK) and "litellm" not in pins(NODE_LOCK)


def test_the_installed_environment_is_exactly_the_lock() -> None:
    installed = {canonicalize_name(d.metadata["Name"]): Version(d.version)
                 for d in metadata.distributions() if d.metadata["Name"]}
    locked = pins(LOCK)
    # A GPU node keeps its own CUDA torch and triton; everything else must match there too.
    own = KEPT_BY_GPU_NODES if installed.get("torch") != locked["torch"] else set()
    differing = {name: (str(installed.get(name)), str(version)) for name, version in locked.items()
                 if name not in own and installed.get(name) != version}
    assert not differing, f"installed (left) differs from the lock (right): {differing}; run `make install`"
