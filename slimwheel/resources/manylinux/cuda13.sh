#!/usr/bin/env bash
# cibuildwheel before-all for CUDA 13 in manylinux_2_28 (`slimwheel container --cuda 13.0` sets it up):
# installs slimwheel, which assembles CUDA 13 from PyPI's nvidia-* wheels (no NVIDIA repository needed), and links
# the toolkit to /usr/local/cuda, where the build configuration expects it.
#   bash /slimwheel/scripts/manylinux-cuda13.sh [CUDA-RELEASE (13.0)] [PIP-SPEC for slimwheel (/slimwheel)]
set -euo pipefail
cuda="${1:-13.0}"
spec="${2:-/slimwheel}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=manylinux-common.sh
source "$here/manylinux-common.sh"

install_slimwheel "$spec"
slimwheel toolkit --cuda "$cuda"
root="$("$SLIMWHEEL_VENV/bin/python" -c 'import sys; from slimwheel.toolkit import ensure_toolkit; print(ensure_toolkit(sys.argv[1]).root)' "$cuda")"
ln -sfn "$root" /usr/local/cuda
/usr/local/cuda/bin/nvcc --version
