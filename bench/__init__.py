"""Benchmarks: `make bench` runs bench.run_all."""
