#!/usr/bin/env bash
# NVRTC cubins of examples/topk-nvrtc's topk::select<float, 256> for sm_90, made on this machine (NVRTC needs no GPU):
# one from the header as it was (namespace-scope constexpr ints, which NVRTC emits as 8 bytes of module data) and one
# from the header as it is (enumerators). gpu/module_mem_probe.sh loads both on the GPU machine and reads what each
# costs in device memory. Prints `cuobjdump -res-usage` of each.
#   bash gpu/nvrtc_cubins.sh [OUT_DIR]          (default _dev/nvrtc-cubins; NVRTC from $NVRTC_DIR, a cu13 folder)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$here/_dev/nvrtc-cubins}"
nv="${NVRTC_DIR:?NVRTC_DIR: the nvidia/cu13 folder of the nvidia-cuda-nvrtc wheel (include/ and lib/)}"
cuobjdump="${CUOBJDUMP:-cuobjdump}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
cat > "$work/one.cpp" <<'CPP'
// Compiles one name expression of a header with NVRTC for sm_90 and writes the cubin.
#include <nvrtc.h>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
static std::string slurp(const char* p) { std::ifstream f(p); std::stringstream s; s << f.rdbuf(); return s.str(); }
int main(int argc, char** argv) {
  if (argc != 5) return 2;
  std::string src = slurp(argv[1]), hdr = slurp(argv[2]);
  const char* hsrc[] = {hdr.c_str()};
  const char* hname[] = {"topk_sort.cuh"};
  nvrtcProgram p;
  nvrtcCreateProgram(&p, src.c_str(), "topk.cuh", 1, hsrc, hname);
  nvrtcAddNameExpression(p, argv[3]);
  const char* opts[] = {"--gpu-architecture=sm_90", "-std=c++17", "-DSLIMWHEEL_NVRTC=1"};  // as slimwheel/nvrtc.hpp
  if (nvrtcCompileProgram(p, 3, opts) != NVRTC_SUCCESS) {
    size_t n; nvrtcGetProgramLogSize(p, &n); std::string log(n, 0); nvrtcGetProgramLog(p, &log[0]);
    std::fprintf(stderr, "%s\n", log.c_str());
    return 1;
  }
  size_t n; nvrtcGetCUBINSize(p, &n); std::vector<char> cubin(n); nvrtcGetCUBIN(p, cubin.data());
  std::ofstream(argv[4], std::ios::binary).write(cubin.data(), static_cast<std::streamsize>(n));
  return 0;
}
CPP
g++ -O1 -o "$work/one" "$work/one.cpp" -I"$nv/include" "$nv/lib/libnvrtc.so.13" -Wl,-rpath,"$nv/lib"
src="$here/examples/topk-nvrtc/csrc"
sed -e 's/^enum : int { kThreads = 256 };/constexpr int kThreads = 256;/' \
    -e 's/^enum : int { kNoIndex = 0x7fffffff };/constexpr int kNoIndex = 0x7fffffff;/' "$src/topk.cuh" > "$work/constexpr.cuh"
grep -q '^constexpr int kThreads' "$work/constexpr.cuh" || { echo "topk.cuh: no enumerators to turn back"; exit 1; }
for v in constexpr enum; do
  file="$work/constexpr.cuh"; [[ $v == enum ]] && file="$src/topk.cuh"
  LD_LIBRARY_PATH="$nv/lib" "$work/one" "$file" "$src/topk_sort.cuh" "topk::select<float, 256>" "$out/topk-$v.cubin"
  echo "topk-$v.cubin ($(stat -c %s "$out/topk-$v.cubin") bytes): $("$cuobjdump" -res-usage "$out/topk-$v.cubin" | grep -o 'GLOBAL:[0-9]*')"
done
