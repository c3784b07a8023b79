#!/usr/bin/env bash
# The test command (README, .ci/run): sets up everything the tests need, then runs the whole suite.
#   bash scripts/test.sh [pytest args...]
# Set-up steps are idempotent and cached (~/.cache/slimwheel, pip's cache, apt): a second run skips them.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"

start=$(date +%s)
phase() { printf '\n=== %s (%ss)\n' "$1" "$(( $(date +%s) - start ))"; }

phase "set-up: venv with slimwheel and test tools"
bash scripts/setup.sh

phase "lint, format and types (scripts/lint.sh static)"
bash scripts/lint.sh static

phase "set-up: CUDA 11.8 static toolchain from Debian non-free"
bash scripts/setup-cuda11.sh

phase "set-up: Redis and bubblewrap from Debian (compiler-cache tests)"
bash scripts/setup-remote-cache.sh

phase "set-up: CUDA 13.0 toolkit from PyPI wheels"
.venv/bin/slimwheel toolkit --cuda 13.0

phase "set-up: CUDA 12.4 toolkit from Debian 13 packages and PyPI wheels"
.venv/bin/slimwheel toolkit --cuda 12.4

phase "tests"
set +e
.venv/bin/python -m pytest -p no:cacheprovider "$@"
rc=$?
set -e
phase "done (pytest exit $rc)"
# pytest exits 5 when it collected no test: that is a failure of this script, not a pass.
exit "$rc"
