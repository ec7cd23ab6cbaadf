"""The named benchmark scenarios: each is runnable, and every module under bench/ is reachable."""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
from pathlib import Path

import pytest

from bench import scenarios
from bench.gpu import fleet_scaling

BENCH = Path(scenarios.__file__).parent
GPU_NAMES = {"corpus", "judge-forgeries", "paired-aa", "suite-twice", "fleet-scaling", "jail-startup"}


def _script(scenario: scenarios.Scenario) -> str:
    return scenario.command[1] if scenario.command[0] == "sh" else scenario.command[0]


def test_every_scenario_names_a_script_that_exists() -> None:
    for scenario in scenarios.SCENARIOS.values():
        script = _script(scenario)
        found = ((BENCH.parent / script).is_file() if scenario.command[0] == "sh"
                 else importlib.util.find_spec(script) is not None)
        assert found, f"{scenario.name}: {script} is missing"
        assert scenario.device in ("cpu", "gpu", "any") and scenario.purpose


def test_the_gpu_scenarios_of_the_other_issues_are_named() -> None:
    runnable_on_gpu = {s.name for s in scenarios.SCENARIOS.values() if s.device != "cpu"}
    assert runnable_on_gpu >= GPU_NAMES


def _modules() -> dict[str, Path]:
    """Every module under bench/, by dotted name (a package by its own name)."""
    found = {}
    for path in BENCH.rglob("*.py"):
        parts = path.relative_to(BENCH.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _reached_from(module: str, modules: dict[str, Path]) -> set[str]:
    """The bench modules `module` imports, or starts as `python -m NAME` (a string naming it)."""
    edges = set()
    for node in ast.walk(ast.parse(modules[module].read_text())):
        if isinstance(node, ast.Import):
            edges |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            edges |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            edges.add(node.value)
    return {name for name in edges if name in modules}


def test_every_module_under_bench_is_reachable_from_a_scenario() -> None:
    modules = _modules()
    todo = [_script(s) for s in scenarios.SCENARIOS.values() if s.command[0] != "sh"]
    for shell in {_script(s) for s in scenarios.SCENARIOS.values() if s.command[0] == "sh"}:
        # every dotted bench module the script names (`-m NAME`, or a variable it runs with -m)
        todo += [m for m in re.findall(r"\b(bench(?:\.\w+)+)", (BENCH.parent / shell).read_text()) if m in modules]
    reached = {"bench", "bench.scenarios"}
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo += _reached_from(module, modules)
    assert sorted(set(modules) - reached) == [], "modules no scenario reaches"


def test_every_shell_script_under_bench_is_a_scenario() -> None:
    shells = {str(p.relative_to(BENCH.parent)) for p in BENCH.rglob("*.sh")}
    assert shells <= {_script(s) for s in scenarios.SCENARIOS.values()}


def test_placeholders_are_filled_and_args_replace_the_defaults(tmp_path: Path) -> None:
    suite = scenarios.SCENARIOS["suite-twice"]
    argv = suite.argv([], tmp_path, "h200", 2)
    assert argv[-6:] == ["--target", "h200", "--out", str(tmp_path), "--run", "A"]
    assert argv[1:3] == ["-m", "bench.gpu.suite_twice"]
    assert suite.argv(["--run", "B"], tmp_path, "h200", 2)[-2:] == ["--run", "B"]
    fleet = scenarios.SCENARIOS["fleet-scaling"].argv([], tmp_path, "h200", 4)
    assert fleet[:3] == ["sh", "bench/gpu/fleet.sh", str(tmp_path)] and "4,1" in fleet


def test_device_names_map_to_targets() -> None:
    assert scenarios.target_for_device("NVIDIA H100 80GB HBM3") == "h100"
    assert scenarios.target_for_device("NVIDIA H200") == "h200"
    with pytest.raises(SystemExit, match="pass the target"):
        scenarios.target_for_device("Some Other GPU")


def test_a_gpu_scenario_is_refused_without_a_gpu_and_a_cpu_one_by_bench_gpu(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scenarios, "gpu_facts", lambda: ("", 0))
    with pytest.raises(SystemExit, match="needs a GPU"):
        scenarios.main(["paired-aa"])
    with pytest.raises(SystemExit, match="CPU scenario"):
        scenarios.main(["--gpu", "api-load"])
    with pytest.raises(SystemExit, match="unknown scenario 'nope'"):
        scenarios.main(["nope"])


def test_the_listing_names_every_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    assert scenarios.main([]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in scenarios.SCENARIOS)


def test_every_gpu_run_record_follows_the_layout_and_a_page_cites_it() -> None:
    pages = [p for p in BENCH.rglob("*.md") if "runs" not in p.parts]
    pages += list((BENCH.parent / "docs").glob("*.md"))
    cited = "\n".join(p.read_text() for p in pages)
    for folder in sorted((BENCH / "gpu" / "runs").iterdir()):
        assert re.fullmatch(r"[a-z-]+-[a-z0-9]+-\d{4}-\d{2}-\d{2}(-[a-z])?", folder.name), (
            f"{folder.name}: run records go in runs/<family>-<device>-<date>/")
        assert f"runs/{folder.name}" in cited, f"no results page cites runs/{folder.name}"


def test_every_scenario_imports_and_its_shell_script_parses() -> None:
    for scenario in scenarios.SCENARIOS.values():
        if scenario.command[0] == "sh":
            script = BENCH.parent / _script(scenario)
            assert subprocess.run(["sh", "-n", str(script)], check=False).returncode == 0
        else:
            importlib.import_module(_script(scenario))


def test_the_fleet_sweep_answers_help_and_its_wrapper_passes_the_options_on(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        fleet_scaling.main(["--help"])
    assert done.value.code == 0 and "--gpus-list" in capsys.readouterr().out
    wrapper = (BENCH / "gpu" / "fleet.sh").read_text()
    assert 'bench.gpu.fleet_scaling --out "$OUT" --pack --since "$T0" "$@"' in wrapper
