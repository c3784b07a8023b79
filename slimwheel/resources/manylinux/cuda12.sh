#!/usr/bin/env bash
# cibuildwheel before-all for CUDA 12 in manylinux_2_28 (`slimwheel container --cuda 12.4` sets it up).
# PyPI has no CUDA 12 nvcc, so this takes CUDA 12.4 from NVIDIA's rpm repository, as faiss and RAPIDS do, pinned to
# the 12.4 packages, plus gcc-toolset-13 (nvcc 12.4 rejects GCC > 13; the image's default is newer). NVIDIA names
# the aarch64 server repository `sbsa`.
# NVIDIA's servers are not reachable from slimwheel's own CI machines: this script is only checked with bash -n and
# ShellCheck there; GitHub's runners and local docker reach it.
#   bash /slimwheel-scripts/cuda12.sh CUDA-RELEASE PIP-SPEC-FOR-SLIMWHEEL
set -euo pipefail
if [[ $# -ne 2 ]]; then
  echo "usage: cuda12.sh CUDA-RELEASE PIP-SPEC (e.g. 12.4 /slimwheel)" >&2
  exit 2
fi
cuda="$1"
spec="$2"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$here/common.sh"

if [[ ! "$cuda" =~ ^12\.[0-9]+$ ]]; then
  echo "cuda12.sh: expected a CUDA 12 release like 12.4, got '$cuda'" >&2
  exit 2
fi
case "$(uname -m)" in
  x86_64) repo_arch=x86_64 ;;
  aarch64) repo_arch=sbsa ;;
  *) echo "cuda12.sh: NVIDIA has no rhel8 CUDA repository for $(uname -m)" >&2; exit 2 ;;
esac
dash="${cuda/./-}"  # 12.4 -> 12-4, NVIDIA's package suffix

dnf install -y dnf-plugins-core
dnf config-manager --add-repo "https://developer.download.nvidia.com/compute/cuda/repos/rhel8/$repo_arch/cuda-rhel8.repo"
dnf install -y --setopt=install_weak_deps=False \
  "cuda-nvcc-$dash" "cuda-cudart-devel-$dash" "cuda-cccl-$dash" "libcublas-devel-$dash" \
  "libcurand-devel-$dash" "cuda-nvprune-$dash" "cuda-cuobjdump-$dash" gcc-toolset-13-gcc-c++
ln -sfn "/usr/local/cuda-$cuda" /usr/local/cuda
/usr/local/cuda/bin/nvcc --version

install_slimwheel "$spec"
# slimwheel compiles and links a cuBLAS kernel with it: the toolkit works before any project is built.
PATH="/opt/rh/gcc-toolset-13/root/usr/bin:$PATH" slimwheel toolkit --root /usr/local/cuda --cuda "$cuda"
