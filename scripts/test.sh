#!/usr/bin/env bash
# The test command (README, .ci/run): sets up everything the tests need, runs the product's suite (tests/), then the
# lab's tests (lab/tests) as a second pytest run of their own; it fails if either fails.
#   bash scripts/test.sh [pytest args...]     # the args go to the product's suite; the lab's tests (seconds) run whole
# Its last line adds up both runs in pytest's words ("N failed, N passed, ... in Ts").
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

logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT

phase "tests (the product's suite: tests/)"
set +e
.venv/bin/python -m pytest -p no:cacheprovider "$@" 2>&1 | tee "$logs/product"
rc=${PIPESTATUS[0]}
set -e

phase "lab tests (lab/tests, a run of their own: the product's tests/ is not on their path)"
set +e
.venv/bin/python -m pytest -p no:cacheprovider lab/tests 2>&1 | tee "$logs/lab"
lab_rc=${PIPESTATUS[0]}
set -e

phase "done (pytest exit $rc, lab tests exit $lab_rc)"
# Both runs' counts added up; a count is pytest's "<number> <word>", read from the last line each run printed.
declare -A total=()
seconds=0
for log in "$logs/product" "$logs/lab"; do
  last="$(sed -e 's/\x1b\[[0-9;]*m//g' "$log" | awk 'NF { line = $0 } END { print line }')"
  while read -r n word; do
    word="${word%s}"  # "1 error", "2 errors": one key
    total[$word]=$(( ${total[$word]:-0} + n ))
  done < <(grep -oE '[0-9]+ (failed|passed|skipped|deselected|xfailed|xpassed|warnings?|errors?)' <<<"$last")
  t="$(grep -oE ' in [0-9]+([.][0-9]+)?s' <<<"$last" | grep -oE '[0-9]+([.][0-9]+)?' || echo 0)"
  seconds="$(awk -v a="$seconds" -v b="$t" 'BEGIN { printf "%.2f", a + b }')"
done
parts=()
for word in failed passed skipped deselected xfailed xpassed warning error; do
  n=${total[$word]:-0}
  if (( n == 0 )); then continue; fi
  case "$word" in warning | error) (( n == 1 )) || word="${word}s" ;; esac
  parts+=("$n $word")
done
summary="$(IFS=,; echo "${parts[*]:-no tests ran}")"
echo "${summary//,/, } in ${seconds}s"
# pytest exits 5 when it collected no test: that is a failure of this script, not a pass (for either run).
if (( rc != 0 )); then
  exit "$rc"
fi
exit "$lab_rc"
