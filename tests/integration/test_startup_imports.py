"""`size-report` imports only what it needs (issue 22 item 7): its start-up is most of its cost on small wheels, where
it must stay under half of `unzip` + `cuobjdump --list-elf` (lab/bench/cost.py measures the ratio)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from testkit.binsynth import elf, fatbin, fatbin_entry
from testkit.wheelmaker import make_wheel

pytestmark = pytest.mark.integration

# What the other commands need and size-report must not pay for: the dependency rules (check, deps: pyelftools,
# auditwheel), the treemap, the build's progress line.
NOT_FOR_SIZE_REPORT = (
    "elftools",
    "auditwheel",
    "slimwheel.check",
    "slimwheel.deps",
    "slimwheel.postbuild.treemap",
    "slimwheel.repair",
    "slimwheel.postbuild.slim",
    "rich.live",
    "hashlib",  # NVRTC records only
    "json",  # the JSON format only
    "pkgutil",  # --help's list of commands only
    "rich",  # the other commands' tables and the build's progress line: size-report draws its own (textable)
)
# What size-report imports only once the wheel's members are inflating (slimwheel.inspect.scan): the parsers, the
# metadata reader, the report and the renderer.
AFTER_START_UP = (
    "slimwheel.render",
    "slimwheel.inspect.elf",
    "slimwheel.inspect.fatbin",
    "slimwheel.inspect.report",
    "email.parser",
    "packaging.requirements",
)


def test_size_report_imports_only_what_it_needs(tmp_path: Path) -> None:
    so = elf(sections={".nv_fatbin": fatbin([fatbin_entry(sm=90, payload=b"\1" * 64)])}, needed=("libcudart.so.13",))
    whl = make_wheel(tmp_path, files={"demo/_ext.so": so}, requires=("nvidia-cuda-runtime>=13.0,<14",))
    code = (
        "import sys, io, contextlib\n"
        "from slimwheel.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    rc = main(['size-report', {str(whl)!r}])\n"
        f"loaded = sorted(m for m in sys.modules if m.startswith({NOT_FOR_SIZE_REPORT!r}))\n"
        "print(rc, loaded)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "0 []", proc.stdout + proc.stderr


def test_machine_names_known_without_pyelftools_agree_with_it() -> None:
    from elftools.elf.enums import ENUM_E_MACHINE

    from slimwheel.inspect.elffile import _COMMON_MACHINES

    names = {v: k for k, v in ENUM_E_MACHINE.items() if isinstance(v, int)}
    assert {n: names[n] for n in _COMMON_MACHINES} == _COMMON_MACHINES


def test_size_report_starts_without_its_renderer() -> None:
    code = (
        "import sys\n"
        "import slimwheel.cli, slimwheel.commands.size_report\n"
        f"print(sorted(m for m in sys.modules if m.startswith({AFTER_START_UP!r})))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]", proc.stdout + proc.stderr
