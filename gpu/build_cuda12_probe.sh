#!/usr/bin/env bash
# Builds gpu/cuda12_probe.cu with slimwheel's assembled CUDA 12.4 toolkit into .carry/cuda12/ (git-ignored, carried to
# the GPU machine): one binary with SASS sm_80 + sm_90 (runs natively on Hopper), one with PTX compute_80 only (the
# driver must JIT CUDA 12.4's PTX). Static cudart, so the GPU machine needs nothing from CUDA 12.
#   bash gpu/build_cuda12_probe.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
slimwheel="${here}/.venv/bin/slimwheel"
[[ -x "$slimwheel" ]] || slimwheel=slimwheel
nvcc="$("$slimwheel" toolkit --cuda 12.4 --format json | python3 -c 'import json, sys; print(json.load(sys.stdin)["nvcc"])')"
out="$here/.carry/cuda12"
mkdir -p "$out"
"$nvcc" -O2 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -Xcompiler -static-libstdc++ \
  -o "$out/probe_sass" "$here/gpu/cuda12_probe.cu"
"$nvcc" -O2 -gencode arch=compute_80,code=compute_80 -Xcompiler -static-libstdc++ \
  -o "$out/probe_ptx" "$here/gpu/cuda12_probe.cu"
ls -l "$out"
