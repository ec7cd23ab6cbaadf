# sourced: a venv over the node's python with the carried wheels; the snapshot on the path
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$PWD
if [ ! -x /tmp/kb/bin/python ]; then
  python3 -m venv --system-site-packages /tmp/kb
  NODE_SITE=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  VENV_SITE=$(/tmp/kb/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "import site; site.addsitedir('$NODE_SITE')" > "$VENV_SITE/zz-node-site.pth"
  /tmp/kb/bin/pip install -q --no-index --find-links .whl --no-deps .whl/*.whl
  echo "$R/.gpu/src" > "$VENV_SITE/kernelband-checkout.pth"
fi
ln -sfn "$R/.corpus" "$R/.gpu/src/.corpus"; mkdir -p "$R/.gpu/src/shared"; ln -sfn "$R/.corpus" "$R/.gpu/src/shared/corpus"
export PYTHONPATH="$R/.gpu/src" LITELLM_LOCAL_MODEL_COST_MAP=True
PY=/tmp/kb/bin/python
