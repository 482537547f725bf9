#!/usr/bin/env bash
# What the deployment files assume of a GPU host, without pog (docs/deploy.md, "Measured on an
# H200"): the NVIDIA device groups in /proc/devices (the agent unit's DeviceAllow=), the
# device nodes' modes, NVRTC and cuBLASLt on the loader's path, and CUDA used the way the
# units and manifests run the agent: user 65532, no capability in any set, no new privileges,
# a CUDA cache of its own; then the same with the kernel's memory-deny-write-execute
# (prctl PR_SET_MDWE, refuse exec gain), the nearest thing here to systemd's
# MemoryDenyWriteExecute=. CUDA is exercised with the GPU machine's CuPy (an NVRTC-compiled
# kernel, as pog builds its own) and PyTorch (a cuBLAS BF16 GEMM), then nvidia-smi.
# Run through the device tool as one command, as root; prints everything.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
date -u; uname -r; nvidia-smi --query-gpu=driver_version,name --format=csv,noheader; echo '--- /proc/devices'; grep -i nvidia /proc/devices; echo '--- nodes'; ls -l /dev/nvidia* 2>&1; echo '--- libs'; ldconfig -p | grep -E 'libnvrtc\.so|libcublasLt\.so'; command -v setpriv
d=$(mktemp -d); chmod 755 $d; mkdir $d/c; chown 65532:65532 $d/c
for mdwe in 0 1; do echo "=== non-root, no caps, no new privs, MDWE=$mdwe"; setpriv --reuid=65532 --regid=65532 --clear-groups --no-new-privs --inh-caps=-all --bounding-set=-all -- env HOME=$d/c CUDA_CACHE_PATH=$d/c/nv$mdwe CUPY_CACHE_DIR=$d/c/cupy$mdwe MDWE=$mdwe python3 - <<'PY'
import os, ctypes
st = open('/proc/self/status').read()
f = lambda k: st.split(k + ':')[1].split()[0]
print('uid', os.getuid(), 'CapEff', f('CapEff'), 'CapBnd', f('CapBnd'), 'NoNewPrivs', f('NoNewPrivs'))
if os.environ['MDWE'] == '1':
    r = ctypes.CDLL(None, use_errno=True).prctl(65, 1, 0, 0, 0)
    print('PR_SET_MDWE', r, os.strerror(ctypes.get_errno()) if r else 'on')
import cupy as cp
k = cp.RawKernel(r'extern "C" __global__ void f(float*x){x[threadIdx.x]*=2;}', 'f')
a = cp.ones(32, dtype=cp.float32); k((1,), (32,), (a,))
print('NVRTC kernel ran:', float(a.sum()))
import torch
x = torch.randn(256, 256, device='cuda', dtype=torch.bfloat16); print('cuBLAS bf16 GEMM:', (x @ x).float().abs().sum().item() > 0)
PY
echo "rc=$?"; done
setpriv --reuid=65532 --regid=65532 --clear-groups --no-new-privs --inh-caps=-all --bounding-set=-all -- nvidia-smi -L; echo "nvidia-smi as 65532 rc=$?"
du -sk $d/c/* 2>&1
