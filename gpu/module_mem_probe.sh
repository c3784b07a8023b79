#!/usr/bin/env bash
# Builds gpu/module_mem_probe.cu with the machine's nvcc and runs each scenario in a fresh process, with lazy and eager
# module loading: what loading a cubin through the driver or runtime API costs in GPU memory, against kernels the
# runtime registered (issue 15). Writes $OUT/module_mem.json (one object per run). Needs a GPU; about a minute.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${OUT:-$PWD/out}"
nvcc="${NVCC:-/usr/local/cuda/bin/nvcc}"
cudadir="$(dirname "$(dirname "$nvcc")")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
"$nvcc" -arch=sm_90 -o "$work/probe" "$here/module_mem_probe.cu" -L"$cudadir/lib64/stubs" -lcuda &
"$nvcc" -arch=sm_90 -cubin -DPROBE_CUBIN -DPROBE_SMALL_ONLY -o "$work/small.cubin" "$here/module_mem_probe.cu" &
"$nvcc" -arch=sm_90 -cubin -DPROBE_CUBIN -o "$work/big.cubin" "$here/module_mem_probe.cu" &
"$nvcc" -arch=sm_90 -cubin -DPROBE_CUBIN -DPROBE_SMALL_ONLY -DPROBE_GLOBAL -o "$work/global.cubin" \
  "$here/module_mem_probe.cu" &
wait
# NVRTC's cubins of topk::select<float, 256> (examples/topk-nvrtc), made on the build machine by
# gpu/nvrtc_cubins.sh: with the header's constexpr ints (8 bytes of module data) and with enumerators (none).
for c in "${NVRTC_CUBINS:-$here/../_dev/nvrtc-cubins}"/*.cubin; do [[ -f "$c" ]] && cp "$c" "$work/"; done
topk=_ZN4topk6selectIfLi256EEEvPKT_iPS1_Pi
{
  echo '{"runs": ['
  first=1
  for loading in LAZY EAGER; do
    while read -r scenario image entry; do
      [[ -n "$scenario" ]] || continue
      [[ "$entry" == topk ]] && entry=$topk
      [[ -z "$image" || -f "$work/$image" ]] || continue
      line="$(CUDA_MODULE_LOADING=$loading "$work/probe" "$scenario" ${image:+"$work/$image"} ${entry:+"$entry"} 2>&1)" \
        || line="{\"scenario\": \"$scenario\", \"error\": \"$(echo "$line" | tr '"\n' "' ")\"}"
      [[ $first -eq 1 ]] || echo ','
      first=0
      echo "{\"loading\": \"$loading\", \"run\": $line}"
    done <<'LIST'
ctx
registered_small
registered_big
module small.cubin
module big.cubin
modules20 small.cubin
library_driver small.cubin
library_runtime small.cubin
registered_then_module small.cubin
module global.cubin
library_driver global.cubin
load_only small.cubin small_kernel
load_only global.cubin small_kernel
load_only topk-constexpr.cubin topk
load_only topk-enum.cubin topk
LIST
  done
  echo '],'
  echo "\"cubin_bytes\": {\"small\": $(stat -c %s "$work/small.cubin"), \"big\": $(stat -c %s "$work/big.cubin")},"
  echo "\"gpu\": \"$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)\","
  echo "\"nvcc\": \"$("$nvcc" --version | tail -2 | head -1)\""
  echo '}'
} > "$out/module_mem.json"
python3 -m json.tool "$out/module_mem.json" > /dev/null && echo "written $out/module_mem.json"
python3 - "$out/module_mem.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["runs"]:
    run = r["run"]
    print(f"{r['loading']:5} {run['scenario']:24} {run.get('image', '').rsplit('/', 1)[-1]:12} "
          + (" ".join(f"{k}={v:.0f}" for k, v in run.get('mib', {}).items() if not k.startswith('after_module_') or k.endswith(('_1', '_2', '_20'))) or run.get('error', '')))
PY
