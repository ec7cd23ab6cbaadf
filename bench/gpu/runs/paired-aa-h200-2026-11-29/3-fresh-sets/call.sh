# A/A on twelve corpus problems never measured A/A before (sets 5 and 6), side by side.
T0=$(date +%s)
. .gpu/setup.sh
mkdir -p $OUT/aa
$PY -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name(0))' > $OUT/versions.txt 2>&1
cd .gpu/src
export KERNELBAND_SANDBOX_MEMORY_BYTES=$((16<<30))
S5=cross_entropy1,fast_rms_layernorm,triton_argmax,kv_cache_copy,layer_norm_liger,fused_layernorm_triton
S6=sin_computation,square_matrix,relu_strided_buffer,int8_matmul_kernel,triton_matmul,pow_scalar_tensor
timeout 450 taskset -c 0-7 $PY -m bench.gpu.paired_aa --corpus .corpus/tritonbench-g --only $S5 --tag set5 --out $OUT/aa > $OUT/aa/set5.log 2>&1 &
timeout 450 taskset -c 8-15 $PY -m bench.gpu.paired_aa --corpus .corpus/tritonbench-g --only $S6 --tag set6 --out $OUT/aa > $OUT/aa/set6.log 2>&1 &
wait
echo "wall $(( $(date +%s) - T0 )) s" >> $OUT/versions.txt
