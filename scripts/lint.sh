#!/usr/bin/env bash
# The fast checks, no CUDA needed: lint, format and types, then the product's tests that start no tool (about two
# minutes). The lab's tests are a run of their own, never part of the product's suite.
#   bash scripts/lint.sh          # lint, types, the product's unit tests: the `fast` job of .github/workflows/tests.yml
#   bash scripts/lint.sh static   # lint, format and types only: scripts/test.sh runs this before the whole suite
#   bash scripts/lint.sh lab      # the lab's tests (lab/tests) alone: the `lab` job of .github/workflows/tests.yml
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
bash scripts/setup.sh >/dev/null
py=.venv/bin/python
start=$(date +%s)
step() { printf '\n--- %s (%ss)\n' "$1" "$(( $(date +%s) - start ))"; }

if [[ "${1:-}" == "lab" ]]; then
  step "the lab's tests (lab/tests, a pytest run of their own)"
  "$py" -m pytest -p no:cacheprovider -q lab/tests
  step "done"
  exit 0
fi

step "ruff check"
"$py" -m ruff check slimwheel devtools testkit tests lab
step "ruff format --check"
"$py" -m ruff format --check slimwheel devtools testkit tests lab
step "mypy --strict (pyproject's [tool.mypy])"
"$py" -m mypy
if [[ "${1:-}" != "static" ]]; then
  step "unit tests (tests/unit, no CUDA tools)"
  "$py" -m pytest -p no:cacheprovider -q -m "not integration and not gpu" tests/unit
fi
step "done"
