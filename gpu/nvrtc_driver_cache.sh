#!/usr/bin/env bash
# Which state outside slimwheel's kernel cache makes NVRTC's compile of an instantiation fast in a later process?
# Each line is a fresh process with an empty slimwheel cache (SLIMWHEEL_NVRTC_CACHE=<new folder>) that makes one
# instantiation of examples/topk-nvrtc ready; the environment named on the line is the only change. The files the
# first process wrote are listed. Needs a GPU, the CUDA 13 nvidia-* wheels and topk_runtime's wheel:
#   bash gpu/nvrtc_driver_cache.sh <folder holding topk_runtime-*.whl>
# (results/h200/nvrtc_driver_cache.txt is its output on the H200.)
set -u
wheels="${1:?usage: nvrtc_driver_cache.sh <folder holding topk_runtime-*.whl>}"
for w in "$wheels"/topk_runtime-*.whl; do python3 -m pip install -q --no-deps --no-index --force-reinstall "$w"; done
prep() {  # dtype k [VAR=value...]
  local dt=$1 k=$2 c
  shift 2
  c=$(mktemp -d)
  env SLIMWHEEL_NVRTC_CACHE="$c" "$@" python3 -c "
import time, topk_runtime as t
t.init(0); t0 = time.perf_counter(); t.prepare('$dt', $k); a = time.perf_counter() - t0
print(f'$dt/$k {a * 1e3:.1f} ms  env: $*')"
}
marker=$(mktemp)
sleep 1
prep float32 128
echo "--- files the first process wrote (outside /proc /sys /dev and the slimwheel cache folders):"
find / -xdev -newer "$marker" -type f 2>/dev/null | grep -v -E '^/(proc|sys|dev)/|/tmp/tmp\.' | head -40
prep float32 128
home=$(mktemp -d)
prep float32 128 HOME="$home"
prep float32 128 CUDA_CACHE_DISABLE=1
prep float32 64 CUDA_CACHE_DISABLE=1
prep float32 64 CUDA_CACHE_DISABLE=1
prep float32 64
prep float32 64
prep float64 512 XDG_CACHE_HOME="$home"
prep float64 512 HOME="$(mktemp -d)"
prep float64 512
du -sh ~/.nv/ComputeCache 2>/dev/null
