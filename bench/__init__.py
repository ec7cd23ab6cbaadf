"""Benchmarks: named scenarios (bench/scenarios.py) that `make bench` and `make bench-gpu` run."""
