#!/bin/sh
# The fleet scaling sweep on a multi-GPU node: install the project into a venv from carried
# wheels (bench/gpu/fleet_venv.sh), then run bench/gpu/fleet_scaling.py with --pack, so that
# OUT_DIR holds few files: scaling.md, scaling.json, install-check.txt and one nN.tar.gz per
# run. Run from the repository root:
#
#   sh bench/gpu/fleet_scaling.sh OUT_DIR --target h200 --gpus-list 4,2 --total-limit-s 560
#
# --total-limit-s counts from this script's start (the install included).
set -eu
T0=$(date +%s)
OUT=${1:?usage: sh bench/gpu/fleet_scaling.sh OUT_DIR [fleet_scaling.py options]}
shift
mkdir -p "$OUT"
. bench/gpu/fleet_venv.sh
exec "$VENV/bin/python" -m bench.gpu.fleet_scaling --out "$OUT" --pack --since "$T0" "$@"
