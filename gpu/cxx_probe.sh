#!/usr/bin/env bash
# Which libstdc++ a C++ link takes on this machine, and whether slimwheel's CMake package links the shared one.
# The faiss module built on the GPU machine carried libstdc++ statically and exported it (docs/faiss.md, "GCC 13
# crash"); this prints what decides that, in seconds, with no faiss build:
#   - the compiler driver's view: c++ -print-file-name for libstdc++.so, libstdc++.a and libstdc++.so.6, the files in
#     GCC's own folder, the packages, the environment's compiler and linker variables;
#   - a plain `c++ -shared` link of one std::regex function (DT_NEEDED, exported libstdc++ symbols, the linker's
#     search folders from `c++ -v`);
#   - the same function as a MODULE of a CMake project that uses slimwheel_cuda_target (needs CMake and nvcc: CMAKE
#     and NVCC, defaults from PATH and /usr/local/cuda), read the same way.
#
#   bash gpu/cxx_probe.sh [OUT_DIR]      (default $OUT, else /tmp/cxx-probe); writes cxx_probe.txt there too
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-${OUT:-/tmp/cxx-probe}}"
mkdir -p "$out"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cxx="${CXX:-c++}"
cmake_bin="${CMAKE:-$(command -v cmake || true)}"
nvcc="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"

read_so() {  # $1: a shared object; prints DT_NEEDED and how many libstdc++ symbols it defines and exports
  readelf -d "$1" | awk '/NEEDED/ {printf "  needs %s\n", $NF}'
  local n
  n=$(readelf --dyn-syms -W "$1" | awk '$7 != "UND" && ($5 == "GLOBAL" || $5 == "WEAK") && $8 ~ /^_ZNSt|^_ZSt|^_ZNKSt|^_ZTISt|^_ZTVSt|^__cxa_/' | wc -l)
  echo "  std:: and __cxa_ symbols defined and exported: $n (header templates count too)"
  if readelf --dyn-syms -W "$1" | awk '$7 != "UND" && $8 ~ /^_ZNSt6locale7classicEv/' | grep -q .; then
    echo "  defines and exports std::locale::classic(): libstdc++ itself is in it (slimwheel's marker)"
  fi
  readelf -S -W "$1" | grep -q '\.note\.stapsdt' && echo "  has .note.stapsdt (libstdc++'s SystemTap probes: a static copy)"
  return 0
}

{
  echo "== machine"
  grep -E '^(PRETTY_NAME)=' /etc/os-release
  echo "CXX=$cxx -> $(readlink -f "$(command -v "$cxx")")"
  "$cxx" --version | head -1
  for v in CC CXX CUDAHOSTCXX CFLAGS CXXFLAGS LDFLAGS LIBRARY_PATH LD_LIBRARY_PATH CMAKE_PREFIX_PATH; do
    [[ -n "${!v:-}" ]] && echo "$v=${!v}"
  done
  echo "== the compiler driver"
  for f in libstdc++.so libstdc++.a libstdc++.so.6; do
    p=$("$cxx" -print-file-name="$f")
    state="not found (printed the bare name)"
    if [[ "$p" == /* ]]; then
      if [[ -e "$p" ]]; then state="$(readlink -f "$p")"; else state="dangling link -> $(readlink "$p")"; fi
    fi
    echo "-print-file-name=$f: $p  [$state]"
  done
  gccdir=$(dirname "$("$cxx" -print-libgcc-file-name)")
  echo "GCC's folder $gccdir:"
  for f in "$gccdir"/libstdc++* "$gccdir"/libsupc++*; do
    [[ -e "$f" || -L "$f" ]] && echo "  $(ls -la "$f")"
  done
  if command -v dpkg >/dev/null; then
    echo "packages:"
    dpkg -l | awk '$2 ~ /^(libstdc\+\+|g\+\+|gcc-[0-9]+$|libgcc-[0-9]+-dev)/ {printf "  %s %s %s\n", $1, $2, $3}'
  fi

  echo "== plain link: $cxx -shared -fPIC of one std::regex function"
  cat > "$work/demo.cpp" <<'EOF'
#include <regex>
#include <string>
extern "C" __attribute__((visibility("default"))) int demo_match(const char* s) {
  std::smatch m;
  std::string text(s);
  return std::regex_match(text, m, std::regex("IVF([0-9]+),Flat")) ? std::stoi(m[1].str()) : -1;
}
EOF
  "$cxx" -O1 -fPIC -shared -fvisibility=hidden -o "$work/plain.so" "$work/demo.cpp" -v 2> "$work/plain.log"
  echo "rc $?"
  read_so "$work/plain.so"
  echo "  linker search folders (-L on the collect2 line, in order):"
  grep -E 'collect2' "$work/plain.log" | tail -1 | tr ' ' '\n' | grep -E '^-L' | sed 's/^/    /'
  echo "  -lstdc++ resolved by the linker to:"
  "$cxx" -O1 -fPIC -shared -o "$work/trace.so" "$work/demo.cpp" -Wl,--trace 2>&1 | grep -E 'stdc\+\+' | sed 's/^/    /'

  if [[ -n "$cmake_bin" && -x "$nvcc" ]]; then
    echo "== CMake MODULE through slimwheel_cuda_target ($("$cmake_bin" --version | head -1), $nvcc)"
    mkdir -p "$work/proj"
    cp "$work/demo.cpp" "$work/proj/demo.cpp"
    cat > "$work/proj/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.18...3.31)
project(cxxprobe LANGUAGES CXX CUDA)
add_subdirectory("$here" slimwheel)
add_library(demo MODULE demo.cpp)
slimwheel_cuda_target(demo)
EOF
    gen=()
    command -v ninja >/dev/null && gen=(-G Ninja)
    "$cmake_bin" -S "$work/proj" -B "$work/build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CUDA_COMPILER="$nvcc" -DSLIMWHEEL_CUDA_ARCHITECTURES=90-real -DSLIMWHEEL_COMPRESSION=size \
      > "$work/configure.log" 2>&1
    echo "configure rc $?"
    grep -A4 -E 'slimwheel:.*libstdc' "$work/configure.log" | sed 's/^/  /'
    "$cmake_bin" --build "$work/build" -v > "$work/cbuild.log" 2>&1
    echo "build rc $?"
    if [[ -f "$work/build/libdemo.so" ]]; then
      read_so "$work/build/libdemo.so"
      echo "  link line: $(grep -E -- '-o libdemo\.so' "$work/cbuild.log" | tail -1)"
    else
      tail -n 20 "$work/cbuild.log" "$work/configure.log"
    fi
  else
    echo "== CMake check skipped: no cmake (CMAKE) or no nvcc at $nvcc"
  fi
} 2>&1 | tee "$out/cxx_probe.txt"
