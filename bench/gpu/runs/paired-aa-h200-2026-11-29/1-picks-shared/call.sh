# A/A: set 1 (the eight of the earlier runs) and set 4 (eight never measured A/A, four of them
# autotuned) side by side, each on its own cores; suite run A beside them on the rest.
T0=$(date +%s)
. .gpu/setup.sh
mkdir -p $OUT/aa $OUT/suite
$PY -c 'import torch, triton, kernelband; print("torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name(0))' > $OUT/versions.txt 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >> $OUT/versions.txt 2>&1
cd .gpu/src
export KERNELBAND_SANDBOX_MEMORY_BYTES=$((16<<30))
S1=apply_penalty,cache_transform_triton,chunk_delta_fwd,attention_llama,bmm_chunk_fwd,attn_fwd_triton,bmm_chunk_bwd,bgmv_shrink_kernel
S4=log_softmax,matmul_triton_autotune,swiglu_backward,quantize_global,layer_norm_triton,geglu_tanh_triton,triton_mul2,rotary_emb
timeout 560 taskset -c 0-4 $PY -m bench.gpu.paired_aa --corpus .corpus/tritonbench-g --only $S1 --tag set1 --out $OUT/aa > $OUT/aa/set1.log 2>&1 &
timeout 560 taskset -c 5-9 $PY -m bench.gpu.paired_aa --corpus .corpus/tritonbench-g --only $S4 --tag set4 --out $OUT/aa > $OUT/aa/set4.log 2>&1 &
taskset -c 10-15 $PY -m bench.gpu.suite_twice --target h200 --run A --timeout 540 --out $OUT/suite > $OUT/suite/runA.log 2>&1 &
wait
echo "wall $(( $(date +%s) - T0 )) s" >> $OUT/versions.txt
cd $OUT && tar czf all.tgz aa suite && ls -la aa suite
