"""GPU benchmarks (`make bench-gpu SCENARIO=...`, bench/scenarios.py) and their results pages."""
