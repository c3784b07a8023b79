"""The pull-request step "Size change against main (job summary)" of .github/workflows/wheels.yml, run as GitHub runs
it (its own `run:` text, read from the workflow, in `bash --noprofile --norc -eo pipefail`): with a stub `gh` that
hands over main's wheel and this checkout's `slimwheel` on PATH, a planted regression (one CUDA module's sm_90 cubin
grown by 64 KiB) lands in $GITHUB_STEP_SUMMARY as a table naming the file, architecture and module, and the step
fails; a growth under 5% passes with the block in the summary; no successful build of main says so and passes."""

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
WORKFLOW = REPO / ".github" / "workflows" / "wheels.yml"
STEP = "Size change against main"
BIN = Path(sys.executable).parent  # this checkout's `slimwheel` console script
CUDA, ARCH = "13.0", "x86_64"

# The GitHub CLI as far as the step uses it: `gh run list` prints $GH_STUB_RUN_ID (nothing when empty, as the real
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


def step_block(text: str, name: str) -> list[str]:
    """The lines of the step (a `- name:` item of a steps list) whose name starts with `name`."""
    lines = text.splitlines()
    starts = [i for i, ln in enumerate(lines) if re.match(rf"^\s*- name: {re.escape(name)}", ln)]
    assert len(starts) == 1, f"{WORKFLOW.name}: {len(starts)} steps named {name!r}..."
    first = starts[0]
    dash = len(lines[first]) - len(lines[first].lstrip())
    end = first + 1
    while end < len(lines) and (not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > dash):
        end += 1
    return lines[first:end]


def literal(step: list[str], key: str) -> str:
    """The step's `key: |` literal block as YAML reads it: dedented by its first line's indent, one final newline."""
    heads = [i for i, ln in enumerate(step) if re.match(rf"^\s*(- )?{key}: \|\s*$", ln)]
    assert len(heads) == 1, f"the step's {key!r} is not one `{key}: |` block:\n" + "\n".join(step)
    head = step[heads[0]]
    indent = len(head) - len(head.lstrip()) + (2 if head.lstrip().startswith("- ") else 0)
    body: list[str] = []
    for ln in step[heads[0] + 1 :]:
        if ln.strip() and len(ln) - len(ln.lstrip()) <= indent:
            break
        body.append(ln)
    while body and not body[-1].strip():
        body.pop()
    assert body, f"the step's {key} block is empty"
    cut = len(body[0]) - len(body[0].lstrip())
    assert all(not ln.strip() or ln[:cut].isspace() for ln in body), "a line indented less than the block's first"
    return "\n".join(ln[cut:] for ln in body) + "\n"


def the_step() -> tuple[list[str], str]:
    step = step_block(WORKFLOW.read_text(), STEP)
    return step, literal(step, "run")


def uploaded_artifact_name() -> str:
    """The name the same job uploads its wheelhouse under, with this matrix entry's values."""
    names: list[str] = re.findall(r"^\s+name: (knn-.+)$", WORKFLOW.read_text(), flags=re.MULTILINE)
    assert len(names) == 1, f"one knn artifact upload expected in {WORKFLOW.name}, found {names}"
    return names[0].replace("${{ matrix.cuda }}", CUDA).replace("${{ matrix.arch }}", ARCH)


def run_step(
    tmp_path: Path, *, old: Path | None, new: Path, artifact_name: str | None = None
) -> tuple[subprocess.CompletedProcess[str], str, str]:
    """Run the step's script in a fresh work folder with NEW in wheelhouse/ and, unless `old` is None, a successful
    build of main whose artifact holds OLD. Returns the process, the job summary and the stub's call log."""
    _, script = the_step()
    stub = tmp_path / "bin"
    stub.mkdir()
    (stub / "gh").write_text(GH_STUB)
    (stub / "gh").chmod(0o755)
    artifact = tmp_path / "artifact"  # what main's job uploaded: its wheelhouse/, wheel and JSON reports
    artifact.mkdir()
    if old is not None:
        shutil.copy(old, artifact)
        (artifact / f"check-cuda{CUDA}-{ARCH}.json").write_text("{}\n")
    work = tmp_path / "work"
    (work / "wheelhouse").mkdir(parents=True)
    shutil.copy(new, work / "wheelhouse")
    (work / "wheelhouse" / f"size-report-cuda{CUDA}-{ARCH}.json").write_text("{}\n")  # earlier steps' reports
    (tmp_path / "step.sh").write_text(script)
    summary = tmp_path / "step_summary.md"
    summary.write_text("")
    log = tmp_path / "gh.log"
    log.write_text("")
    bash = shutil.which("bash")
    assert bash, "bash not found"
    env = {
        "PATH": f"{stub}:{BIN}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "CI": "true",
        "GITHUB_ACTIONS": "true",
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_REPOSITORY": "owner/repo",
        "GITHUB_WORKFLOW_REF": f"owner/repo/.github/workflows/{WORKFLOW.name}@refs/pull/7/merge",
        "GH_TOKEN": "x",
        "CUDA": CUDA,
        "ARCH": ARCH,
        "GH_STUB_LOG": str(log),
        "GH_STUB_RUN_ID": "" if old is None else "123",
        "GH_STUB_ARTIFACT": artifact_name or uploaded_artifact_name(),
        "GH_STUB_ARTIFACT_DIR": str(artifact),
    }
    # GitHub Actions' `shell: bash`: bash --noprofile --norc -eo pipefail {0}
    proc = subprocess.run(
        [bash, "--noprofile", "--norc", "-eo", "pipefail", str(tmp_path / "step.sh")],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return proc, summary.read_text(encoding="utf-8"), log.read_text()


def table_rows(md: str) -> list[str]:
    return [line for line in md.splitlines() if line.startswith("| ")]


def test_the_step_is_a_pull_request_step_with_a_token() -> None:
    step, script = the_step()
    (cond,) = [ln.split("if:", 1)[1].strip() for ln in step if re.match(r"^\s+if:", ln)]
    # pull requests only; after a failed check too (a wheel over budget is when the table matters), not when cancelled
    assert "github.event_name == 'pull_request'" in cond and "!cancelled()" in cond, cond
    assert "hashFiles('wheelhouse/*.whl') != ''" in cond, cond
    assert any(re.match(r"^\s+GH_TOKEN: \$\{\{ github\.token \}\}$", ln) for ln in step), step
    assert "slimwheel diff " in script and '>> "$GITHUB_STEP_SUMMARY"' in script, script


def test_a_planted_regression_is_in_the_summary_and_fails_the_job(tmp_path: Path) -> None:
    # the wheels of the diff unit tests: three CUDA modules with SASS 80 and 90; module #1's sm_90 cubin grows
    old = grown_wheel(tmp_path / "old", "1.0")
    new = grown_wheel(tmp_path / "new", "1.1", grow=64 * 1024)
    proc, md, calls = run_step(tmp_path, old=old, new=new)
    out = f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}\nsummary:\n{md}\ngh calls:\n{calls}"
    assert proc.returncode == ExitCode.OVER_BUDGET, f"the step should fail with slimwheel's exit 10\n{out}"
    assert "more than --fail-over 5%" in proc.stderr, out
    # the wheel came from main's last successful build of this workflow, under the name this job uploads
    assert "run list --repo owner/repo --workflow wheels.yml --branch main --event push --status success" in calls, out
    assert f"run download 123 --repo owner/repo --name knn-cuda{CUDA}-{ARCH} --dir baseline" in calls, out
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
    proc, md, calls = run_step(tmp_path, old=old, new=new)
    out = f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}\nsummary:\n{md}\ngh calls:\n{calls}"
    assert proc.returncode == 0, out
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
    proc, md, calls = run_step(tmp_path, old=None, new=new)
    out = f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}\nsummary:\n{md}\ngh calls:\n{calls}"
    assert proc.returncode == 0, out
    assert md == "slimwheel diff: no successful build of main to compare with yet.\n", out
    assert calls.startswith("run list ") and "run download" not in calls, out
    assert not (tmp_path / "work" / "baseline").exists(), out


def test_a_baseline_run_without_this_artifact_passes_and_says_so(tmp_path: Path) -> None:
    # main's last run has no artifact of this name (a new matrix entry, or expired): no table, no failure, a line why
    old = grown_wheel(tmp_path / "old", "1.0")
    new = grown_wheel(tmp_path / "new", "1.1", grow=64 * 1024)
    proc, md, calls = run_step(tmp_path, old=old, new=new, artifact_name="knn-cuda12.4-x86_64")
    out = f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}\nsummary:\n{md}\ngh calls:\n{calls}"
    assert proc.returncode == 0, out
    assert md == (
        f"slimwheel diff: main's run 123 has no artifact knn-cuda{CUDA}-{ARCH} (a new matrix entry, or expired).\n"
    ), out
