#!/usr/bin/env bash
# The fast checks, no CUDA needed: lint, format and types, then the tests that start no tool (about two minutes).
#   bash scripts/lint.sh          # all of it: the `fast` job of .github/workflows/tests.yml
#   bash scripts/lint.sh static   # lint, format and types only: scripts/test.sh runs this before the whole suite
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
bash scripts/setup.sh >/dev/null
py=.venv/bin/python
start=$(date +%s)
step() { printf '\n--- %s (%ss)\n' "$1" "$(( $(date +%s) - start ))"; }

step "ruff check"
"$py" -m ruff check slimwheel devtools testkit tests lab
step "ruff format --check"
"$py" -m ruff format --check slimwheel devtools testkit tests lab
step "mypy --strict (pyproject's [tool.mypy])"
"$py" -m mypy
if [[ "${1:-}" != "static" ]]; then
  step "unit tests (tests/unit and lab/tests, no CUDA tools)"
  "$py" -m pytest -p no:cacheprovider -q -m "not integration and not gpu" tests/unit lab/tests
fi
step "done"
