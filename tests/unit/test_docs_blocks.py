"""Every command block users run from the README, docs/ and the examples' READMEs (```bash, ```sh, ```console) names the test that runs it
(issue 38 item 5): a new block fails here until a test runs it, or it is named as one that no test can run (the whole
suite, hours of faiss builds, a GPU host). Where a test runs a block's commands with set-up of its own, what the block
tells users to install is checked against that set-up here."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from helpers.torchenv import BUILD_TOOLS

REPO = Path(__file__).resolve().parents[2]
_BLOCK = re.compile(r"^```(bash|sh|console|shell)\n(.*?)^```", re.M | re.S)

# (page, index of the block on the page) -> the test that runs it, as `path::function`, or why none can
RUN_BY: dict[tuple[str, int], str] = {
    ("README.md", 0): "tests/integration/test_release.py::test_the_readmes_install_block_runs_as_written",
    # scripts/setup.sh + `slimwheel build examples/knn` (the main job; release-check runs it from the built wheel);
    # its second command, scripts/test.sh, is the whole suite: CI (.ci/run) runs it
    ("README.md", 1): "tests/integration/test_build_knn.py::test_build_succeeds_and_reports",
    ("docs/release.md", 0): "tests/integration/test_release.py::test_the_readmes_install_block_runs_as_written",
    ("docs/torch.md", 0): "tests/integration/test_torch_op.py::test_pip_installs_each_beside_torch_with_torchs_pins",
    ("docs/platform-floor.md", 0): "tests/unit/test_platform_floor.py",
    ("docs/platform-floor.md", 1): "tests/integration/test_sysroot_cap.py",
    ("docs/faiss.md", 0): "none: the faiss profiles build for hours on 2 cores (lab/, run by hand and recorded)",
    ("docs/faiss.md", 1): "none: runs on the GPU host (lab/gpu/faiss_h200.sh), never in CI",
    # the main job from the installed wheel, with PIP_FIND_LINKS (scripts/release-check.sh)
    ("examples/knn/README.md", 0): "tests/integration/test_release.py::test_the_installed_wheel_ran_the_main_job",
    # a) pip wheel --no-build-isolation, the entry point finds the module (b: slimwheel_DIR, as `slimwheel build` does)
    ("examples/knn/README.md", 1): "tests/integration/test_cmake_module.py::built_wheel",
    (
        "examples/knn/README.md",
        2,
    ): "tests/integration/test_build_knn.py::test_a_fresh_venv_installs_it_with_pypis_cuda13_wheels",
    (
        "examples/torch-op/README.md",
        0,
    ): "tests/integration/test_torch_op.py::test_pip_installs_each_beside_torch_with_torchs_pins",
}


def blocks() -> dict[tuple[str, int], str]:
    out = {}
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted(REPO.glob("examples/*/README.md"))]:
        for i, m in enumerate(_BLOCK.finditer(page.read_text(encoding="utf-8"))):
            out[(page.relative_to(REPO).as_posix(), i)] = m.group(2)
    return out


def test_every_command_block_names_its_test() -> None:
    found = set(blocks())
    assert found == set(RUN_BY), f"not named: {sorted(found - set(RUN_BY))}; gone: {sorted(set(RUN_BY) - found)}"


@pytest.mark.parametrize("where", sorted(k for k, v in RUN_BY.items() if not v.startswith("none:")))
def test_the_named_test_exists(where: tuple[str, int]) -> None:
    path, _, function = RUN_BY[where].partition("::")
    text = (REPO / path).read_text(encoding="utf-8")
    assert not function or re.search(rf"^def {function}\(", text, re.M), RUN_BY[where]


@pytest.mark.parametrize("where", [("docs/torch.md", 0), ("examples/torch-op/README.md", 0)])
def test_the_torch_pages_install_what_the_torch_tests_install(where: tuple[str, int]) -> None:
    # docs/torch.md's setuptools path failed in a fresh venv ("Unmet dependencies: wheel"): the page named none of the
    # build tools the tests' torch environment installs (helpers.torchenv.BUILD_TOOLS)
    block = blocks()[where]
    pips = [shlex.split(line.split("#")[0]) for line in block.splitlines() if line.startswith("pip install")]
    named = {arg for argv in pips for arg in argv[2:]}
    assert set(BUILD_TOOLS) <= named, sorted(set(BUILD_TOOLS) - named)
