#!/usr/bin/env bash
# Compiles pog's CUDA sources with NVRTC, as `Gpu::open` does at run time (same order, one
# program), on a machine without a GPU: NVRTC needs no device. Catches a kernel that no longer
# compiles before a GPU session is spent on it. Fetches NVRTC from PyPI into target/nvrtc once.
#
#   scripts/check-kernels.sh [ARCH]     (default compute_90)
set -euo pipefail
cd "$(dirname "$0")/.."
arch=${1:-compute_90}
dir=target/nvrtc
lib=$(find "$dir" -name 'libnvrtc.so.1*' 2>/dev/null | head -n1 || true)
if [ -z "$lib" ]; then
  mkdir -p "$dir"
  python3 -m pip download --quiet --no-deps -d "$dir" nvidia-cuda-nvrtc-cu12
  (cd "$dir" && python3 -m zipfile -e nvidia_cuda_nvrtc_cu12-*.whl .)
  lib=$(find "$dir" -name 'libnvrtc.so.1*' | head -n1)
fi
python3 - "$lib" "$arch" crates/matgen/src/fill.cu crates/device/src/gpu/kernels.cu crates/device/src/gpu/blake3.cu crates/device/src/gpu/memproof.cu <<'PY'
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
arch, files = sys.argv[2], sys.argv[3:]
# The commitment kernels' prelude (gpu::commitment_prelude) with a stand-in key: only whether
# the sources compile is checked here.
prelude = "#define POG_COMMIT_KEY_WORDS 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u\n"
texts = [open(f).read() for f in files]
src = "\n".join(texts[:2] + [prelude] + texts[2:]).encode()
prog = ctypes.c_void_p()
if lib.nvrtcCreateProgram(ctypes.byref(prog), src, b"pog.cu", 0, None, None) != 0:
    sys.exit("nvrtcCreateProgram failed")
opts = (ctypes.c_char_p * 1)(f"--gpu-architecture={arch}".encode())
rc = lib.nvrtcCompileProgram(prog, 1, opts)
size = ctypes.c_size_t()
lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
log = ctypes.create_string_buffer(size.value)
lib.nvrtcGetProgramLog(prog, log)
if log.value.strip():
    print(log.value.decode())
if rc != 0:
    sys.exit(f"the kernels do not compile for {arch}")
print(f"kernels compile for {arch}: {', '.join(files)}")
PY
