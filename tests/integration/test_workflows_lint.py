"""The GitHub Actions workflows pass actionlint (which also runs ShellCheck on their `run:` steps), and call what
exists: scripts/test.sh, and slimwheel commands that the CLI has."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

from slimwheel.cli import cli

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
BIN = Path(sys.executable).parent


def actionlint(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("actionlint", path=str(BIN)) or shutil.which("actionlint")
    assert exe, "actionlint not found: it comes with the test extra"
    assert shutil.which("shellcheck", path=str(BIN)) or shutil.which("shellcheck"), "shellcheck not found"
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}  # actionlint runs shellcheck from PATH
    return subprocess.run([exe, *args], capture_output=True, text=True, cwd=cwd, env=env)


def test_there_are_workflows() -> None:
    assert {p.name for p in WORKFLOWS} >= {"tests.yml", "wheels.yml"}


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_actionlint_passes(workflow: Path) -> None:
    proc = actionlint(str(workflow.relative_to(REPO)))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_actionlint_finds_problems(tmp_path: Path) -> None:
    # the lint above can fail: an undefined matrix key and an unquoted variable in a run step are both reported
    wf = tmp_path / ".github" / "workflows" / "bad.yml"
    wf.parent.mkdir(parents=True)
    wf.write_text(
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - run: echo ${{ matrix.nope }}\n      - run: rm -rf $HOME/x/$1\n"
    )
    proc = actionlint(str(wf), cwd=tmp_path)
    assert proc.returncode != 0
    assert "matrix" in proc.stdout and "SC2086" in proc.stdout


def test_the_test_workflow_runs_the_readme_test_command() -> None:
    text = (REPO / ".github" / "workflows" / "tests.yml").read_text()
    assert "bash scripts/test.sh" in text
    assert (REPO / "scripts" / "test.sh").is_file()


def test_the_wheel_workflow_reports_checks_and_uploads() -> None:
    text = (REPO / ".github" / "workflows" / "wheels.yml").read_text()
    # check, the Markdown size report and the diff: slimwheel's own action (action.yml), whose script writes
    # check's report into the job summary
    assert text.count("uses: ./\n") == 2  # the example's job and the faiss job
    action = (REPO / "scripts" / "slimwheel-action.sh").read_text()
    assert "slimwheel check " in action and '--format markdown -o "$report"' in action
    assert 'cat "$report" >> "$summary"' in action
    assert "actions/upload-artifact@" in text
    assert "workflow_dispatch:" in text
    # the example, for both majors, and for aarch64 on an arm64 runner
    assert re.search(r'cuda: "12\.4", arch: x86_64', text) and re.search(r'cuda: "13\.0", arch: x86_64', text)
    assert re.search(r'cuda: "13\.0", arch: aarch64, runner: ubuntu-24\.04-arm', text)


def test_workflows_call_only_slimwheel_commands_that_exist() -> None:
    # the workflows, and the action they use with its script
    commands = set(cli.list_commands(click.Context(cli)))
    used = set()
    for wf in [*WORKFLOWS, REPO / "action.yml", REPO / "scripts" / "slimwheel-action.sh"]:
        lines = wf.read_text().splitlines()
        commands_text = "\n".join(ln for ln in lines if not ln.strip().startswith(("name:", "- name:", "#")))
        used |= set(re.findall(r"\bslimwheel ([a-z][a-z-]+)", commands_text))
    assert {"container", "size-report", "check"} <= used
    assert used <= commands, f"unknown slimwheel commands in workflows: {sorted(used - commands)}"


def run_commands(text: str) -> list[str]:
    """The shell commands of a workflow's `run:` steps (plain, `|` and folded `>-` forms)."""
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)(?:- )?run: ?(.*)$", lines[i])
        i += 1
        if not m:
            continue
        indent, rest = len(m.group(1)), m.group(2).strip()
        if rest not in ("|", ">-", ">"):
            out.append(rest)
            continue
        block = []
        while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent):
            block.append(lines[i].strip())
            i += 1
        out += block if rest == "|" else [" ".join(block)]
    return out


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
@pytest.mark.parametrize("cuda", ["12.4", "13.0"])
def test_the_workflows_container_commands_parse(cuda: str, arch: str, capsys: pytest.CaptureFixture[str]) -> None:
    import json
    import shlex

    from slimwheel.cli import main

    calls = [c for wf in WORKFLOWS for c in run_commands(wf.read_text()) if c.startswith("slimwheel container")]
    assert len(calls) >= 3  # the example (print + build) and faiss
    if cuda == "12.4":  # the faiss job runs CUDA 13 only: its recipe asks for compression = "size"
        calls = [c for c in calls if " faiss " not in c]
    for call in calls:
        argv = shlex.split(call.replace('"$CUDA"', cuda).replace('"$ARCH"', arch).replace("$ARCH", arch))[1:]
        argv[1] = str(REPO / argv[1])  # the project folder, relative to the checkout
        if "--print-config" not in argv:
            argv.append("--print-config")
        argv += ["--format", "json"]
        assert main(argv) == 0, call
        table = json.loads(capsys.readouterr().out)["cibuildwheel"]
        assert f"/cuda{cuda.split('.')[0]}.sh {cuda} " in table["before-all"]
        if "--arch" in argv:
            assert table["archs"] == [arch]
