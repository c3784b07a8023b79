#!/usr/bin/env bash
# Assemble a CUDA 12 toolkit on a Debian/Ubuntu x86_64 machine: compiler binaries from Debian 13's non-free
# nvidia-cuda-toolkit (downloaded, never installed), headers and libraries from PyPI's nvidia-*-cu12 wheels.
# A thin wrapper over `slimwheel toolkit --cuda 12.4` for CI scripts; cached in ~/.cache/slimwheel/toolkits.
#   bash scripts/setup-cuda12.sh [CUDA-RELEASE (12.4)] [more `slimwheel toolkit` options, e.g. --format json]
set -euo pipefail
cuda="${1:-12.4}"
shift || true
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ -x "$here/.venv/bin/slimwheel" ]]; then
  exec "$here/.venv/bin/slimwheel" toolkit --cuda "$cuda" "$@"
elif command -v slimwheel >/dev/null 2>&1; then
  exec slimwheel toolkit --cuda "$cuda" "$@"
fi
echo "setup-cuda12.sh: slimwheel is not installed (no $here/.venv/bin/slimwheel, none on PATH)" >&2
echo "  install it first: bash scripts/setup.sh, or pip install -e $here" >&2
exit 3
