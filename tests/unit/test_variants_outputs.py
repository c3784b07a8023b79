"""`slimwheel variants`' outputs as an attacker meets them (issue 41 S5, S6): names taken from a validated file name,
never from METADATA; links, FIFOs and folders planted in the output folder neither written through nor hung on;
nothing renamed into place unless every output was made. And the pure parts of the variant metadata: the CUDA lower
bound and the PEP 503 pages."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import io
import json
import os
import re
import stat
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_slim_wheel import TAG, _lib, _wheel  # type: ignore[import-not-found]  # a sibling test module

from slimwheel.cli import main
from slimwheel.cuda.arch import parse_targets
from slimwheel.cuda.versions import CudaVersion
from slimwheel.errors import BadInputError
from slimwheel.inspect.fatbin import FatbinEntry
from slimwheel.inspect.report import WheelReport
from slimwheel.inspect.scan import inspect_wheel
from slimwheel.postbuild.slim import judge_output
from slimwheel.postbuild.variants import (
    Release,
    cuda_lower_bound,
    make_variants,
    release_of,
    simple_pages,
    variant_json,
    variant_properties,
)
from testkit.wheelmaker import make_wheel

INDEX = "pkg-1.2.0-variants.json"
_JUDGE = "slimwheel.postbuild.variants.judge_output"  # what reads each written wheel back


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _metadata_version(src: Path, version: str) -> Path:
    """A copy of `src` whose METADATA says `Version: <version>` (RECORD kept right), under the same file name: the
    file name and the .dist-info folder say 1.2.0, only METADATA lies."""
    out = src.parent / "lying" / src.name
    out.parent.mkdir(exist_ok=True)
    with zipfile.ZipFile(src) as zin:
        members = {zi.filename: zin.read(zi) for zi in zin.infolist()}
    meta = "pkg-1.2.0.dist-info/METADATA"
    members[meta] = re.sub(rb"(?m)^Version: .*$", b"Version: " + version.encode(), members[meta])
    rows = io.StringIO()
    for name, data in members.items():
        if not name.endswith("/RECORD"):
            rows.write(f"{name},{_hash(data)},{len(data)}\n")
    rows.write("pkg-1.2.0.dist-info/RECORD,,\n")
    members["pkg-1.2.0.dist-info/RECORD"] = rows.getvalue().encode()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zout:
        for name, data in members.items():
            zout.writestr(name, data)
    return out


def _everything(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


# What the attack used and its neighbours: a path, a NUL, a version longer than any file name, another release.
HOSTILE_VERSIONS = ("../../escape", "1.2.0/../../../x", "1.2.0\x00evil", "1." + "0" * 300, "1.3.0", "1.2.0+local")


@pytest.mark.parametrize("version", HOSTILE_VERSIONS)
def test_a_metadata_version_unlike_the_file_names_is_refused(
    tmp_path: Path, version: str, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _metadata_version(_wheel(tmp_path), version)
    before = _everything(tmp_path)
    out = tmp_path / "a" / "b" / "out"
    with pytest.raises(BadInputError, match="METADATA"):
        make_variants(src, out)
    assert main(["variants", "--offline", "-o", str(out), str(src)]) == 3
    err = capsys.readouterr().err
    assert str(src) in err and "Traceback" not in err and "internal error" not in err
    # nothing written anywhere: not in -o, not beside it, not where the version's path points
    assert _everything(tmp_path) - before <= {"a", "a/b", "a/b/out"}


def test_the_index_is_named_by_the_normalized_file_name(tmp_path: Path) -> None:
    """PEP 825 names `{name}-{version}-variants.json` as wheel file names are normalized: 01.2.0 is 1.2.0."""
    src = make_wheel(
        tmp_path / "in",
        name="Pkg.Name",
        version="01.2.0",
        tag=TAG,
        files={"pkg/_ext.abi3.so": _lib(), "pkg/__init__.py": b""},
        requires=("nvidia-cuda-runtime>=13.0,<14",),
    )
    r = make_variants(src, tmp_path / "v")
    assert r.index_file.name == "pkg_name-1.2.0-variants.json"
    assert r.simple == tmp_path / "v" / "simple" / "pkg-name" / "index.html"
    assert r.index_file.is_file() and r.simple.is_file()


def test_links_planted_under_output_names_are_replaced_not_written_through(tmp_path: Path) -> None:
    src = _wheel(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious\n")
    wheel_name = f"pkg-1.2.0-{TAG}-sm9x.whl"
    for name in (INDEX, wheel_name, src.name):
        (out / name).symlink_to(victim)
    r = make_variants(src, out)
    assert victim.read_bytes() == b"precious\n"
    for name in (INDEX, wheel_name, src.name):
        assert stat.S_ISREG(os.lstat(out / name).st_mode), name
    assert (out / src.name).read_bytes() == src.read_bytes()
    assert r.index_file == out / INDEX
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # the private folder is gone


@pytest.mark.parametrize("where", [INDEX, f"pkg-1.2.0-{TAG}-sm9x.whl", "simple/pkg/index.html"])
def test_a_fifo_or_folder_under_an_output_name_is_refused_before_anything_is_written(
    tmp_path: Path, where: str
) -> None:
    src = _wheel(tmp_path)
    for kind in ("fifo", "folder"):
        out = tmp_path / f"out-{kind}"
        (out / where).parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(out / where) if kind == "fifo" else (out / where).mkdir()
        planted = _everything(out)
        fds = len(os.listdir("/proc/self/fd"))
        with pytest.raises(BadInputError, match="not a file"):
            make_variants(src, out)  # a FIFO opened for writing would block here forever
        assert _everything(out) == planted, kind
        assert len(os.listdir("/proc/self/fd")) == fds  # the output folder's handle is closed on refusal too


@pytest.mark.parametrize("link", ["simple", "simple/pkg"])
def test_a_link_where_the_index_folder_goes_is_refused(tmp_path: Path, link: str) -> None:
    src = _wheel(tmp_path)
    out = tmp_path / "out"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / link).parent.mkdir(parents=True, exist_ok=True)
    (out / link).symlink_to(elsewhere, target_is_directory=True)
    planted = _everything(out)
    with pytest.raises(BadInputError, match="index folder"):
        make_variants(src, out)
    assert not any(elsewhere.iterdir())
    assert _everything(out) == planted


def _on_call(n: int, action: Callable[[], None]) -> Callable[..., object]:
    """judge_output that runs `action` when it is called the n-th time (the n-th wheel has been written)."""
    real = judge_output
    calls = [0]

    def judge(*args: object, **kwargs: object) -> object:
        calls[0] += 1
        if calls[0] == n:
            action()
        return real(*args, **kwargs)  # type: ignore[arg-type]

    return judge


def test_a_failing_output_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = _wheel(tmp_path)
    out = tmp_path / "out"

    def fail() -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_JUDGE, _on_call(3, fail))
    with pytest.raises(OSError, match="No space"):
        make_variants(src, out)
    assert _everything(out) == set()  # no wheel renamed, no private folder left


def test_a_fifo_planted_while_the_run_lasts_is_refused_before_any_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = _wheel(tmp_path)
    out = tmp_path / "out"
    monkeypatch.setattr(_JUDGE, _on_call(2, lambda: os.mkfifo(out / INDEX)))
    with pytest.raises(BadInputError, match="not a file"):
        make_variants(src, out)
    assert _everything(out) == {INDEX}  # only what was planted: no wheel was renamed into place
    assert stat.S_ISFIFO(os.lstat(out / INDEX).st_mode)


def _entry(target: str, *, compression: str = "none", isa: tuple[int, int] | None = None) -> FatbinEntry:
    (t,) = parse_targets(target)
    kind = "ptx" if target.startswith("compute") else "sass"
    return FatbinEntry(
        kind=kind,
        arch=t.arch,
        target=t,
        compression=compression,  # type: ignore[arg-type]
        stored_size=1,
        uncompressed_size=1,
        ptx_isa=isa,
    )


def test_variant_cuda_lower_bound() -> None:
    """The oldest driver CUDA version that loads a variant's code: what the NVIDIA provider's
    cuda_version_lower_bound compares with the driver's."""
    assert cuda_lower_bound(None, [_entry("sm_90")]) is None  # no CUDA major known: no bound claimed
    assert cuda_lower_bound(12, [_entry("sm_90"), _entry("sm_80")]) == CudaVersion(12, 0)  # minor version compat.
    assert cuda_lower_bound(13, []) == CudaVersion(13, 0)
    assert cuda_lower_bound(12, [_entry("sm_90", compression="zstd")]) == CudaVersion(12, 4)  # 550.54.14's release
    assert cuda_lower_bound(13, [_entry("sm_90", compression="zstd")]) == CudaVersion(13, 0)
    assert cuda_lower_bound(12, [_entry("sm_90"), _entry("compute_90", isa=(8, 7))]) == CudaVersion(12, 8)
    assert cuda_lower_bound(12, [_entry("compute_90", isa=(8, 8)), _entry("compute_80", isa=(8, 0))]) == CudaVersion(
        12, 9
    )
    # an ISA newer than the table: the newest release known below it (a bound that holds, as the report's floor)
    assert cuda_lower_bound(13, [_entry("compute_120", isa=(9, 99))]) == CudaVersion(13, 5)


def test_simple_pages_link_every_file_two_folders_up() -> None:
    pages = simple_pages(
        Release(project="pkg-name", version="1.0"), [("a&b.whl", "00ff"), ("pkg_name-1.0-variants.json", "11")]
    )
    assert set(pages) == {"simple/index.html", "simple/pkg-name/index.html"}
    assert b'<a href="pkg-name/">pkg-name</a>' in pages["simple/index.html"]
    project = pages["simple/pkg-name/index.html"].decode()
    assert '<a href="../../a&amp;b.whl#sha256=00ff">a&amp;b.whl</a>' in project
    assert 'href="../../pkg_name-1.0-variants.json#sha256=11"' in project


def test_the_docs_show_the_variant_json_variants_writes(repo_root: Path) -> None:
    """docs/slim.md's variant.json is what `variants` writes for an sm9x wheel of CUDA 12 (kept from drifting)."""
    text = (repo_root / "docs" / "slim.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"```json\n(.*?)```", text, flags=re.S)
    (sm_90,) = parse_targets("sm_90")
    assert json.loads(block) == variant_json({"sm9x": variant_properties((sm_90,), CudaVersion(12, 0))})


_REPORT: list[WheelReport] = []


def _report_of_pkg(tmp_path_factory: pytest.TempPathFactory) -> WheelReport:
    if not _REPORT:
        _REPORT.append(inspect_wheel(_wheel(tmp_path_factory.mktemp("release"))))
    return _REPORT[0]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.text(max_size=40), version=st.text(max_size=300))
def test_release_names_come_from_the_file_name_whatever_metadata_says(
    tmp_path_factory: pytest.TempPathFactory, name: str, version: str
) -> None:
    """Any METADATA Name and Version: either they mean the file name's project and version, and the index is named
    from the file name, or the wheel is refused; never a name with a path, a NUL or a character a file name lacks."""
    report = dataclasses.replace(_report_of_pkg(tmp_path_factory), name=name, version=version)
    wheel = Path(f"pkg-1.2.0-{TAG}.whl")
    try:
        release = release_of(wheel, report)
    except BadInputError as e:
        assert str(wheel) in str(e)
        return
    assert release == Release(project="pkg", version="1.2.0")
    assert re.fullmatch(r"[a-z0-9_.]+-[0-9a-z.+!]+", release.stem)
