#!/usr/bin/env bash
# cibuildwheel before-all for CUDA 13 in manylinux_2_28, x86_64 or aarch64 (`slimwheel container --cuda 13.x` sets it
# up): installs slimwheel, which assembles CUDA 13 from PyPI's nvidia-* wheels (no NVIDIA repository needed; the
# wheels exist for both architectures), and links the toolkit to /usr/local/cuda, where the build configuration
# expects it.
#   bash /slimwheel-scripts/cuda13.sh CUDA-RELEASE PIP-SPEC-FOR-SLIMWHEEL
set -euo pipefail
if [[ $# -ne 2 ]]; then
  echo "usage: cuda13.sh CUDA-RELEASE PIP-SPEC (e.g. 13.0 /slimwheel)" >&2
  exit 2
fi
cuda="$1"
spec="$2"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$here/common.sh"

install_slimwheel "$spec"
slimwheel toolkit --cuda "$cuda"
root="$("$SLIMWHEEL_VENV/bin/python" -c 'import sys; from slimwheel.toolkit import ensure_toolkit; print(ensure_toolkit(sys.argv[1]).root)' "$cuda")"
ln -sfn "$root" /usr/local/cuda
/usr/local/cuda/bin/nvcc --version
