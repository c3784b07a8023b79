#!/usr/bin/env bash
# The logic of the GitHub Action in action.yml (which installs slimwheel and runs this with its inputs as INPUT_*):
#   1. `slimwheel check` of the wheels; its verdicts and size reports (Markdown) go into the job summary;
#   2. on a pull request with INPUT_BASELINE_ARTIFACT set: the same wheels of the base branch's last successful run
#      of this workflow (that artifact, through the GitHub CLI) against these, `slimwheel diff` into the job summary;
#   3. outputs in $GITHUB_OUTPUT: exit-code and ok (check's), report (the Markdown file), diff-exit-code;
#   4. exits with check's exit code, else the diff's (a growth over INPUT_FAIL_OVER).
# Inputs (environment): INPUT_WHEELS (paths or globs, whitespace-separated), INPUT_PROJECT (the folder whose
# [tool.slimwheel] gives the defaults), INPUT_BUDGET, INPUT_REQUIRE_ARCH, INPUT_MANYLINUX, INPUT_CHECK_ARGS (more
# arguments for check, e.g. --offline), INPUT_BASELINE_ARTIFACT, INPUT_BASELINE_WORKFLOW (default: this workflow's
# file), INPUT_FAIL_OVER (default 5%), INPUT_OUTPUT_DIR (default: $RUNNER_TEMP/slimwheel). `slimwheel` and, for the
# diff, `gh` (with GH_TOKEN) must be on PATH. Tested by tests/integration/test_action_script.py.
set -euo pipefail

summary="${GITHUB_STEP_SUMMARY:?GITHUB_STEP_SUMMARY is not set: not in GitHub Actions}"
outputs="${GITHUB_OUTPUT:?GITHUB_OUTPUT is not set: not in GitHub Actions}"
out="${INPUT_OUTPUT_DIR:-${RUNNER_TEMP:-.}/slimwheel}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

# The wheels, as absolute paths: check runs in the project folder, whose pyproject.toml gives the defaults.
shopt -s nullglob
wheels=()
read -r -a patterns <<< "${INPUT_WHEELS:-}"
for pattern in "${patterns[@]}"; do
  # shellcheck disable=SC2206  # the pattern is expanded on purpose (nullglob: no match, no word)
  matched=($pattern)
  for w in "${matched[@]}"; do
    wheels+=("$(cd "$(dirname "$w")" && pwd)/$(basename "$w")")
  done
done
shopt -u nullglob
if [[ ${#wheels[@]} -eq 0 ]]; then
  echo "slimwheel-action.sh: no wheel matches '${INPUT_WHEELS:-}'" >&2
  echo "slimwheel: no wheel matches \`${INPUT_WHEELS:-}\`" >> "$summary"
  { echo "exit-code=3"; echo "ok=false"; echo "report="; echo "diff-exit-code="; } >> "$outputs"
  exit 3
fi

args=()
[[ -n "${INPUT_BUDGET:-}" ]] && args+=(--budget "$INPUT_BUDGET")
[[ -n "${INPUT_REQUIRE_ARCH:-}" ]] && args+=(--require-arch "$INPUT_REQUIRE_ARCH")
[[ -n "${INPUT_MANYLINUX:-}" ]] && args+=(--manylinux "$INPUT_MANYLINUX")
read -r -a extra <<< "${INPUT_CHECK_ARGS:-}"
report="$out/check.md"
set +e
(cd "${INPUT_PROJECT:-.}" && slimwheel check "${wheels[@]}" "${args[@]}" "${extra[@]}" --format markdown -o "$report")
check_rc=$?
set -e
if [[ -f "$report" ]]; then
  cat "$report" >> "$summary"
fi
ok=false
[[ $check_rc -eq 0 ]] && ok=true
{ echo "exit-code=$check_rc"; echo "ok=$ok"; echo "report=$report"; } >> "$outputs"

# The size change against the base branch: the wheels of its last successful build of this workflow (this workflow's
# own file, GITHUB_WORKFLOW_REF: owner/repo/.github/workflows/NAME.yml@ref, so a rename never silently drops the
# baseline; --event push, so a fork's branch of that name is never the baseline).
diff_rc=""
if [[ "${GITHUB_EVENT_NAME:-}" == "pull_request" && -n "${INPUT_BASELINE_ARTIFACT:-}" ]]; then
  base="${GITHUB_BASE_REF:-main}"
  workflow="${INPUT_BASELINE_WORKFLOW:-}"
  if [[ -z "$workflow" ]]; then
    workflow="${GITHUB_WORKFLOW_REF%@*}"
    workflow="${workflow##*/}"
  fi
  run_id="$(gh run list --repo "$GITHUB_REPOSITORY" --workflow "$workflow" --branch "$base" --event push \
    --status success --limit 1 --json databaseId --jq '.[0].databaseId // empty')"
  if [[ -z "$run_id" ]]; then
    echo "slimwheel diff: no successful build of $base to compare with yet." >> "$summary"
  elif ! gh run download "$run_id" --repo "$GITHUB_REPOSITORY" --name "$INPUT_BASELINE_ARTIFACT" \
    --dir "$out/baseline"; then
    echo "slimwheel diff: $base's run $run_id has no artifact $INPUT_BASELINE_ARTIFACT (a new matrix entry, or" \
      "expired)." >> "$summary"
  else
    shopt -s nullglob
    old=("$out"/baseline/*.whl)
    shopt -u nullglob
    if [[ ${#old[@]} -ne 1 || ${#wheels[@]} -ne 1 ]]; then
      echo "slimwheel diff: expected one wheel in the baseline and one checked, found ${#old[@]} and" \
        "${#wheels[@]}" >&2
      diff_rc=3
    else
      set +e
      slimwheel diff "${old[0]}" "${wheels[0]}" --format markdown --fail-over "${INPUT_FAIL_OVER:-5%}" >> "$summary"
      diff_rc=$?
      set -e
    fi
  fi
fi
echo "diff-exit-code=$diff_rc" >> "$outputs"
if [[ $check_rc -ne 0 ]]; then
  exit "$check_rc"
fi
exit "${diff_rc:-0}"
