"""The GitHub Action (action.yml) and its logic, scripts/slimwheel-action.sh, run as GitHub runs a composite action's
step (`bash --noprofile --norc -eo pipefail`) with a fake $GITHUB_STEP_SUMMARY and $GITHUB_OUTPUT, this checkout's
`slimwheel` on PATH and a stub `gh` that hands over the base branch's wheel: check's verdict and size report land in
the summary and its exit code in the outputs and the exit status; on a pull request a planted regression (one CUDA
module's sm_90 cubin grown by 64 KiB) lands in the summary as a table naming the file, architecture and module and
fails the step; a growth under 5% passes; no baseline says so and passes. .github/workflows/wheels.yml uses the
action with the artifact name it uploads."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.diffwheels import grown_wheel

from slimwheel.errors import ExitCode

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
ACTION = REPO / "action.yml"
SCRIPT = REPO / "scripts" / "slimwheel-action.sh"
WORKFLOW = REPO / ".github" / "workflows" / "wheels.yml"
BIN = Path(sys.executable).parent  # this checkout's `slimwheel` console script
CUDA, ARCH = "13.0", "x86_64"
ARTIFACT = f"knn-cuda{CUDA}-{ARCH}"
# The test wheels (helpers.diffwheels) have SASS 80 and 90 and no requirement on the CUDA runtime they need.
CHECK = {"INPUT_REQUIRE_ARCH": "8.0,9.0", "INPUT_CHECK_ARGS": "--no-dependencies --offline"}

# The GitHub CLI as far as the script uses it: `gh run list` prints $GH_STUB_RUN_ID (nothing when empty, as the real
# one does for `--jq '.[0].databaseId // empty'` over no runs); `gh run download ID --name N --dir D` copies the
# artifact folder into D, and fails like gh when N is not the artifact's name. Every call is logged.
GH_STUB = r"""#!/usr/bin/env bash
set -euo pipefail
printf '%s\n' "$*" >> "$GH_STUB_LOG"
case "${1:-} ${2:-}" in
  "run list")
    if [ -n "$GH_STUB_RUN_ID" ]; then printf '%s\n' "$GH_STUB_RUN_ID"; fi ;;
  "run download")
    shift 2
    name="" dir="."
    while [ "$#" -gt 0 ]; do
      case "$1" in
        --name) name="$2"; shift 2 ;;
        --dir) dir="$2"; shift 2 ;;
        *) shift ;;
      esac
    done
    if [ "$name" != "$GH_STUB_ARTIFACT" ]; then
      echo "no artifact matches any of the names or patterns provided" >&2
      exit 1
    fi
    mkdir -p "$dir"
    cp "$GH_STUB_ARTIFACT_DIR"/* "$dir"/ ;;
  *) echo "gh stub: unexpected call: $*" >&2; exit 2 ;;
esac
"""


def run_action(
    tmp_path: Path,
    *,
    old: Path | None,
    new: Path | None,
    artifact_name: str = ARTIFACT,
    event: str = "pull_request",
    inputs: dict[str, str] | None = None,
) -> tuple[subprocess.CompletedProcess[str], str, dict[str, str], str]:
    """Run the script in a fresh work folder with NEW in wheelhouse/ and, unless `old` is None, a successful build of
    main whose artifact holds OLD. Returns the process, the job summary, the outputs and the stub's call log."""
    stub = tmp_path / "bin"
    stub.mkdir()
    (stub / "gh").write_text(GH_STUB)
    (stub / "gh").chmod(0o755)
    artifact = tmp_path / "artifact"  # what main's job uploaded: its wheelhouse/, wheel and JSON report
    artifact.mkdir()
    if old is not None:
        shutil.copy(old, artifact)
        (artifact / f"size-report-cuda{CUDA}-{ARCH}.json").write_text("{}\n")
    work = tmp_path / "work"
    (work / "wheelhouse").mkdir(parents=True)
    if new is not None:
        shutil.copy(new, work / "wheelhouse")
    (work / "wheelhouse" / f"size-report-cuda{CUDA}-{ARCH}.json").write_text("{}\n")  # an earlier step's report
    summary, outputs, log = tmp_path / "step_summary.md", tmp_path / "output", tmp_path / "gh.log"
    for f in (summary, outputs, log):
        f.write_text("")
    bash = shutil.which("bash")
    assert bash, "bash not found"
    env = {
        "PATH": f"{stub}:{BIN}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "CI": "true",
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": event,
        "GITHUB_BASE_REF": "main" if event == "pull_request" else "",
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_OUTPUT": str(outputs),
        "GITHUB_REPOSITORY": "owner/repo",
        "GITHUB_WORKFLOW_REF": f"owner/repo/.github/workflows/{WORKFLOW.name}@refs/pull/7/merge",
        "RUNNER_TEMP": str(tmp_path / "runner-temp"),
        "GH_TOKEN": "x",
        "GH_STUB_LOG": str(log),
        "GH_STUB_RUN_ID": "" if old is None else "123",
        "GH_STUB_ARTIFACT": artifact_name,
        "GH_STUB_ARTIFACT_DIR": str(artifact),
        # what action.yml passes by default
        "INPUT_WHEELS": "wheelhouse/*.whl",
        "INPUT_PROJECT": ".",
        "INPUT_FAIL_OVER": "5%",
        "INPUT_BASELINE_ARTIFACT": ARTIFACT,
        **CHECK,
        **(inputs or {}),
    }
    (tmp_path / "runner-temp").mkdir()
    proc = subprocess.run(
        [bash, "--noprofile", "--norc", "-eo", "pipefail", str(SCRIPT)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    pairs = dict(line.split("=", 1) for line in outputs.read_text().splitlines() if line)
    return proc, summary.read_text(encoding="utf-8"), pairs, log.read_text()


def table_rows(md: str) -> list[str]:
    return [line for line in md.splitlines() if line.startswith("| ")]


def diff_block(md: str) -> str:
    """The part of the summary that `slimwheel diff` wrote (after check's verdicts and size reports)."""
    at = md.find("slimwheel diff")
    assert at >= 0, md
    return md[md.rfind("\n", 0, at) + 1 :]


def test_the_action_passes_every_input_to_the_script_and_the_workflow_uses_it() -> None:
    action = ACTION.read_text()
    inputs = re.findall(r"^  ([a-z-]+):\n    description:", action.split("\noutputs:")[0], re.M)
    assert {"wheels", "budget", "require-arch", "manylinux", "baseline-artifact"} <= set(inputs)
    for name in inputs:
        if name in ("slimwheel-spec", "github-token"):
            continue  # the install step's, and gh's (GH_TOKEN)
        env = "INPUT_" + name.upper().replace("-", "_")
        assert f"{env}: ${{{{ inputs.{name} }}}}" in action and env in SCRIPT.read_text(), name
    assert 'run: bash "$GITHUB_ACTION_PATH/scripts/slimwheel-action.sh"' in action
    for output in ("exit-code", "ok", "report", "diff-exit-code"):
        assert f"value: ${{{{ steps.check.outputs.{output} }}}}" in action
    wf = WORKFLOW.read_text()
    assert "uses: ./\n" in wf and "baseline-artifact: knn-cuda${{ matrix.cuda }}-${{ matrix.arch }}" in wf
    # the artifact the same job uploads, under the name the action downloads from main
    assert re.search(r"^\s+name: knn-cuda\$\{\{ matrix.cuda \}\}-\$\{\{ matrix.arch \}\}$", wf, re.M)


def test_check_passes_the_summary_has_its_report_and_the_outputs_say_so(tmp_path: Path) -> None:
    new = grown_wheel(tmp_path / "new", "1.0")
    proc, md, outputs, calls = run_action(tmp_path, old=None, new=new, event="push")
    out = f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}\nsummary:\n{md}\ngh calls:\n{calls}"
    assert proc.returncode == 0, out
    assert md.startswith("### `pkg-1.0-") and "**check: passed**" in md and "| CC | GPU | runs by | target |" in md, out
    assert calls == "", out  # not a pull request: no baseline, no diff
    report = outputs.pop("report")
    assert outputs == {"exit-code": "0", "ok": "true", "diff-exit-code": ""}, out
    assert Path(report).read_text() == md


def test_a_failed_check_fails_with_its_exit_code_after_the_summary(tmp_path: Path) -> None:
    old = grown_wheel(tmp_path / "old", "1.0")
    new = grown_wheel(tmp_path / "new", "1.0")
    proc, md, outputs, calls = run_action(tmp_path, old=old, new=new, inputs={"INPUT_BUDGET": "1KiB"})
    out = f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}\nsummary:\n{md}\ngh calls:\n{calls}"
    assert proc.returncode == ExitCode.OVER_BUDGET, out
    assert "**check: FAILED**" in md and "- :x: budget:" in md, out
    assert outputs["exit-code"] == "10" and outputs["ok"] == "false", out
    assert outputs["diff-exit-code"] == "0" and "slimwheel diff" in md, out  # the table still comes


def test_no_wheel_is_a_bad_input(tmp_path: Path) -> None:
    proc, md, outputs, _ = run_action(tmp_path, old=None, new=None)
    assert proc.returncode == ExitCode.BAD_INPUT and "no wheel matches" in proc.stderr
    assert md == "slimwheel: no wheel matches `wheelhouse/*.whl`\n" and outputs["exit-code"] == "3"


def test_a_planted_regression_is_in_the_summary_and_fails_the_job(tmp_path: Path) -> None:
    # the wheels of the diff unit tests: three CUDA modules with SASS 80 and 90; module #1's sm_90 cubin grows
    old = grown_wheel(tmp_path / "old", "1.0")
    new = grown_wheel(tmp_path / "new", "1.1", grow=64 * 1024)
    proc, summary, outputs, calls = run_action(tmp_path, old=old, new=new)
    md = diff_block(summary)
    out = f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}\nsummary:\n{md}\ngh calls:\n{calls}"
    assert proc.returncode == ExitCode.OVER_BUDGET, f"the step should fail with slimwheel's exit 10\n{out}"
    assert outputs["exit-code"] == "0" and outputs["diff-exit-code"] == "10", out  # check passed, the diff failed
    assert "more than --fail-over 5%" in proc.stderr, out
    # the wheel came from main's last successful build of this workflow, under the name this job uploads
    assert "run list --repo owner/repo --workflow wheels.yml --branch main --event push --status success" in calls, out
    assert (
        f"run download 123 --repo owner/repo --name {ARTIFACT} --dir {tmp_path / 'runner-temp' / 'slimwheel' / 'baseline'}"
        in calls
    ), out
    # the block is in the summary although the step failed: the verdict, then the table, largest changes first
    assert md.startswith("### ❌ slimwheel diff: `pkg-1.0-") and "` → `pkg-1.1-" in md.splitlines()[0], out
    assert re.search(
        r"^\*\*Over the limit:\*\* the wheel grew by [\d.]+% .*more than --fail-over 5%$", md, re.MULTILINE
    ), out
    rows = table_rows(md)
    assert rows[:2] == [
        "| level | file | what | old | new | change | % |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: |",
    ], out
    top = rows[2:6]
    assert any(
        r.startswith("| module | `pkg/_ext.abi3.so` | module #1 (sm_80,sm_90) | ") and "+64.0 KiB" in r for r in top
    ), out
    arch = "| arch | `pkg/_ext.abi3.so` | sass 90 | 12.0 KiB | 76.0 KiB | +64.0 KiB |"
    assert any(r.startswith(arch) for r in top), out
    # section names come from the wheel: shown as code spans (shown.md_code)
    assert any(r.startswith("| section | `pkg/_ext.abi3.so` | `.nv_fatbin` | ") and "+64.0 KiB" in r for r in top), out
    assert "module #0" not in md and "module #2" not in md, out


@pytest.mark.parametrize("grow", [0, 512], ids=["same", "under-5pct"])
def test_a_growth_within_5_percent_passes_with_the_block_in_the_summary(tmp_path: Path, grow: int) -> None:
    old = grown_wheel(tmp_path / "old", "1.0")
    new = grown_wheel(tmp_path / "new", "1.0", grow=grow)
    growth = new.stat().st_size - old.stat().st_size
    assert (growth > 0) == (grow > 0) and growth < 0.05 * old.stat().st_size, (growth, old.stat().st_size)
    proc, summary, outputs, calls = run_action(tmp_path, old=old, new=new)
    md = diff_block(summary)
    out = f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}\nsummary:\n{md}\ngh calls:\n{calls}"
    assert proc.returncode == 0, out
    assert outputs["diff-exit-code"] == "0", out
    assert "run download 123 " in calls, out
    mark = "📈" if grow else "✅"
    assert md.startswith(f"### {mark} slimwheel diff: `pkg-1.0-"), out
    assert "Within --fail-over 5%." in md and "Over the limit" not in md and "❌" not in md, out
    rows = table_rows(md)
    assert rows[0] == "| level | file | what | old | new | change | % |", out
    if grow:
        assert any(r.startswith("| arch | `pkg/_ext.abi3.so` | sass 90 | ") and "+512 B" in r for r in rows), out
    else:
        assert rows[2:] == ["| - | - | no change | | | | |"], out


def test_no_successful_build_of_main_passes_and_says_so(tmp_path: Path) -> None:
    new = grown_wheel(tmp_path / "new", "1.1", grow=64 * 1024)
    proc, md, outputs, calls = run_action(tmp_path, old=None, new=new)
    md = md[md.index("slimwheel diff") :]
    out = f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}\nsummary:\n{md}\ngh calls:\n{calls}"
    assert proc.returncode == 0, out
    assert md == "slimwheel diff: no successful build of main to compare with yet.\n", out
    assert outputs["diff-exit-code"] == "", out
    assert calls.startswith("run list ") and "run download" not in calls, out
    assert not (tmp_path / "runner-temp" / "slimwheel" / "baseline").exists(), out


def test_a_baseline_run_without_this_artifact_passes_and_says_so(tmp_path: Path) -> None:
    # main's last run has no artifact of this name (a new matrix entry, or expired): no table, no failure, a line why
    old = grown_wheel(tmp_path / "old", "1.0")
    new = grown_wheel(tmp_path / "new", "1.1", grow=64 * 1024)
    proc, md, outputs, calls = run_action(tmp_path, old=old, new=new, artifact_name="knn-cuda12.4-x86_64")
    md = md[md.index("slimwheel diff") :]
    out = f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}\nsummary:\n{md}\ngh calls:\n{calls}"
    assert proc.returncode == 0, out
    assert md == f"slimwheel diff: main's run 123 has no artifact {ARTIFACT} (a new matrix entry, or expired).\n", out
    assert outputs["diff-exit-code"] == "", out
