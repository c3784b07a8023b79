"""External libraries (`--external`, `external-libs`): parsing, folder lookup, RPATH, Requires-Dist merge, and the
check rule that accepts a library found through an RPATH folder of a required project."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from packaging.metadata import Metadata

from slimwheel import config as cfgmod
from slimwheel.check import check_wheel, make_policy
from slimwheel.cli import main
from slimwheel.cuda import libs as cudalibs
from slimwheel.deps import dependency_problems
from slimwheel.errors import BadInputError, ConfigError
from slimwheel.external import (
    ExternalLib,
    check_can_tie,
    folder_from_files,
    installed_files,
    parse_external,
    parse_externals,
    resolve_external,
    used_externals,
)
from slimwheel.inspect.dynamic import ElfInfo
from slimwheel.inspect.scan import inspect_wheel
from slimwheel.repair import wanted_rpath
from slimwheel.rpath import origin_target
from slimwheel.wheelfile import merge_requires_dist
from testkit.binsynth import elf as synth_elf
from testkit.wheelmaker import make_wheel

REPO = Path(__file__).resolve().parents[2]
BLAS = "libscipy_openblas.so"


def elf(path: str, *needed: str, rpath: tuple[str, ...] = (), soname: str | None = None) -> ElfInfo:
    return ElfInfo(path=path, soname=soname, needed=tuple(needed), rpath=rpath, runpath=())


def ext(pattern: str = BLAS, requirement: str = "scipy-openblas32>=0.3.28", folder: str | None = None) -> ExternalLib:
    return ExternalLib(pattern=pattern, requirement=requirement, folder=folder)


# ---------------------------------------------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"{BLAS}=scipy-openblas32>=0.3.28", ext()),
        (f"{BLAS}=scipy-openblas32>=0.3.28@scipy_openblas32/lib", ext(folder="scipy_openblas32/lib")),
        (f" {BLAS} = scipy-openblas32 >= 0.3.28 @ scipy_openblas32/lib/ ", ext(folder="scipy_openblas32/lib")),
        ("libfoo.so.*=foo", ext("libfoo.so.*", "foo")),
        ("libfoo.so.1=foo[blas]<2,>=1", ext("libfoo.so.1", "foo[blas]<2,>=1")),
    ],
)
def test_parse_external(text: str, expected: ExternalLib) -> None:
    got = parse_external(text, where="--external")
    assert got == expected
    assert parse_external(got.spec(), where="x") == got  # the spec form reads back


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("libfoo.so.1", "expected SONAME=REQUIREMENT[@FOLDER]"),
        ("libfoo.so.1=", "expected SONAME=REQUIREMENT[@FOLDER]"),
        ("=foo", "is not a SONAME"),
        ("lib foo.so=foo", "is not a SONAME"),
        ("libfoo.so.1=foo>=>1", "requirement 'foo>=>1' for libfoo.so.1 does not parse"),
        ("libfoo.so.1=foo; sys_platform == 'linux'", "has a marker"),
        ("libfoo.so.1=foo @ https://example.org/foo.whl", "is a URL"),
        ("libfoo.so.1=foo@../elsewhere", "must be a plain path inside site-packages"),
        ("libfoo.so.1=foo@/usr/lib", "must be a plain path inside site-packages"),
        ("libfoo.so.1=foo@a/../b", "must be a plain path inside site-packages"),
        ("libcublas.so.13=nvidia-cublas", "matches CUDA libraries (libcublas.so.13)"),
        ("libcu*=foo", "matches CUDA libraries"),
        ("libcuda.so.1=foo", "matches CUDA libraries"),
    ],
)
def test_bad_external_names_the_flag_and_the_problem(text: str, message: str) -> None:
    with pytest.raises(BadInputError) as e:
        parse_external(text, where="--external")
    assert str(e.value).startswith("--external: ") and message in str(e.value)


def test_the_same_soname_twice_is_refused() -> None:
    with pytest.raises(BadInputError, match="libfoo.so.1 is given twice"):
        parse_externals(["libfoo.so.1=foo", "libfoo.so.1=bar"], where="--external")


def test_cli_reports_a_bad_external_before_repairing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["repair", "-w", str(tmp_path), "--external", "libfoo.so.1=foo>=>1", str(tmp_path / "x.whl")])
    assert rc == 3
    assert "--external: requirement 'foo>=>1' for libfoo.so.1 does not parse" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------- folder lookup


def test_folder_from_the_distributions_files() -> None:
    files = ["scipy_openblas32/__init__.py", f"scipy_openblas32/lib/{BLAS}", "../../bin/x", "s-0.3.dist-info/RECORD"]
    assert folder_from_files(ext(), files) == "scipy_openblas32/lib"
    assert folder_from_files(ext("libfoo.so.*", "foo"), ["foo/libs/libfoo.so.3", "foo/x.py"]) == "foo/libs"


def test_folder_lookup_failures_name_the_library_and_the_requirement() -> None:
    with pytest.raises(BadInputError, match=f"external library {BLAS}: scipy-openblas32 is not installed") as e:
        folder_from_files(ext(), None)
    assert "@FOLDER" in str(e.value)  # the hint says how to give it
    with pytest.raises(BadInputError, match="the installed scipy-openblas32 has no file of that name"):
        folder_from_files(ext(), ["scipy_openblas32/__init__.py", f"../../lib/{BLAS}"])  # outside site-packages
    with pytest.raises(BadInputError, match=r"in several folders \(a/lib, b/lib\)"):
        folder_from_files(ext(), [f"a/lib/{BLAS}", f"b/lib/{BLAS}"])


def test_resolve_uses_the_given_folder_or_the_installed_files() -> None:
    given = ext(folder="x/lib")

    def no_lookup(requirement: str) -> list[str]:
        raise AssertionError("a given folder needs no lookup")

    assert resolve_external(given, no_lookup) is given
    asked: list[str] = []

    def files_of(requirement: str) -> list[str]:
        asked.append(requirement)
        return [f"scipy_openblas32/lib/{BLAS}"]

    assert resolve_external(ext(), files_of).folder == "scipy_openblas32/lib"
    assert asked == ["scipy-openblas32>=0.3.28"]


def test_installed_files_of_a_real_distribution() -> None:
    files = installed_files("packaging>=20")
    assert files is not None and "packaging/requirements.py" in files
    assert installed_files("surely-not-installed-slimwheel-probe") is None


# ---------------------------------------------------------------------------------------------------- RPATH


def test_rpath_points_at_the_folder_from_where_each_elf_installs() -> None:
    blas = [ext(folder="scipy_openblas32/lib")]
    assert wanted_rpath(elf("faiss/_swigfaiss.so", BLAS, "libc.so.6"), None, [], blas) == (
        "$ORIGIN/../scipy_openblas32/lib",
    )
    assert wanted_rpath(elf("a/b/_x.so", BLAS), None, [], blas) == ("$ORIGIN/../../scipy_openblas32/lib",)
    assert wanted_rpath(elf("_top.so", BLAS), None, [], blas) == ("$ORIGIN/scipy_openblas32/lib",)
    assert wanted_rpath(elf("d-1.data/platlib/faiss/_x.so", BLAS), None, [], blas) == (
        "$ORIGIN/../scipy_openblas32/lib",
    )
    # a library auditwheel bundled may be the one that needs it
    assert wanted_rpath(elf("faiss.libs/libhelper-ab12.so.1", BLAS), None, [], blas) == (
        "$ORIGIN/../scipy_openblas32/lib",
    )
    # an ELF that does not need it gets nothing
    assert wanted_rpath(elf("faiss/_other.so", "libc.so.6"), None, [], blas) is None


def test_rpath_keeps_own_and_cuda_entries_and_is_idempotent() -> None:
    cu13 = [cudalibs.lookup("cudart", 13)]
    blas = [ext(folder="scipy_openblas32/lib")]
    after = elf("faiss/_x.so", "libcudart.so.13", BLAS, rpath=("$ORIGIN/../faiss.libs",))
    want = ("$ORIGIN/../faiss.libs", "$ORIGIN/../nvidia/cu13/lib", "$ORIGIN/../scipy_openblas32/lib")
    assert wanted_rpath(after, None, cu13, blas) == want
    done = elf("faiss/_x.so", "libcudart.so.13", BLAS, rpath=want)
    assert wanted_rpath(done, None, cu13, blas) is None
    # the build's own entry, spelled another way, is the same folder: not repeated
    built = elf("faiss/_x.so", BLAS, rpath=("${ORIGIN}/../scipy_openblas32/lib/",))
    assert wanted_rpath(built, None, [], blas) is None


def test_used_externals_and_unaccounted() -> None:
    blas = ext(folder="scipy_openblas32/lib")
    foo = ext("libfoo.so.*", "foo", folder="foo/lib")
    elfs = {
        # $ORIGIN: the loader finds the wheel's own libbar beside it only through its search path (deps.reach)
        "pkg/_x.so": elf("pkg/_x.so", BLAS, "libc.so.6", "libbar.so.2", rpath=("$ORIGIN",)),
        "pkg/libbar.so.2": elf("pkg/libbar.so.2", "libfoo.so.3", soname="libbar.so.2"),
    }
    assert used_externals(elfs.values(), [blas, foo]) == (blas, foo)
    # a library the wheel carries itself makes no external "used"
    assert used_externals(elfs.values(), [ext("libbar.so.2", "bar")]) == ()
    tags = ["cp311-cp311-manylinux_2_28_x86_64"]
    v = dependency_problems(list(elfs.values()), cuda_major=None, requires=[], tags=tags)
    assert [p.split(":")[0] for p in v.problems] == [
        "pkg/_x.so needs libscipy_openblas.so",
        "pkg/libbar.so.2 needs libfoo.so.3",
    ]
    # accounted for once each file's RPATH points into the folder of a required project (what repair writes)
    repaired = [
        elf("pkg/_x.so", BLAS, "libc.so.6", "libbar.so.2", rpath=("$ORIGIN", "$ORIGIN/../scipy_openblas32/lib")),
        elf("pkg/libbar.so.2", "libfoo.so.3", soname="libbar.so.2", rpath=("$ORIGIN/../foo/lib",)),
    ]
    reqs = [blas.requirement, foo.requirement]
    assert dependency_problems(repaired, cuda_major=None, requires=reqs, tags=tags).problems == ()


@pytest.mark.parametrize(
    ("entry", "elf_path", "target"),
    [
        ("$ORIGIN/../scipy_openblas32/lib", "faiss/_swigfaiss.so", "scipy_openblas32/lib"),
        ("${ORIGIN}/../scipy_openblas32/lib", "faiss/_swigfaiss.so", "scipy_openblas32/lib"),
        ("$ORIGIN/../x/lib", "a/b/c.so", "a/x/lib"),  # inside the wheel's own package
        ("$ORIGIN/scipy_openblas32/lib", "_top.so", "scipy_openblas32/lib"),
        ("$ORIGIN/../scipy_openblas32/lib", "d-1.data/platlib/faiss/_x.so", "scipy_openblas32/lib"),
        ("$ORIGIN", "faiss/_x.so", "faiss"),
        ("$ORIGIN/../../lib", "faiss/_x.so", None),  # outside site-packages
        ("/usr/lib", "faiss/_x.so", None),
        ("lib", "faiss/_x.so", None),
    ],
)
def test_origin_target(entry: str, elf_path: str, target: str | None) -> None:
    assert origin_target(entry, elf_path) == target


def test_repair_warns_when_check_cannot_tie_the_folder_to_the_project() -> None:
    assert check_can_tie(ext(folder="scipy_openblas32/lib")) is None
    assert check_can_tie(ext("libQt5Core.so.5", "PyQt5-Qt5", folder="PyQt5/Qt5/lib")) is not None


# ---------------------------------------------------------------------------------------------------- Requires-Dist

META = """Metadata-Version: 2.1
Name: demo
Version: 1.0
Summary: demo
Requires-Dist: numpy>=1.25
Requires-Dist: scipy-openblas32<0.4,>=0.3.28
Requires-Dist: foo>=1; extra == "foo"

# demo

Body text: Requires-Dist: not-a-header
"""


def reqs_of(text: str) -> list[str]:
    return [str(r) for r in Metadata.from_email(text, validate=True).requires_dist or []]


def test_an_existing_requirement_that_already_says_it_is_kept_as_written() -> None:
    for asked in ("scipy-openblas32", "scipy-openblas32>=0.3.28", "scipy_openblas32<0.4"):
        text, got = merge_requires_dist(META, [asked], path="METADATA")
        assert text == META and got == ("scipy-openblas32<0.4,>=0.3.28",)


def test_a_new_clause_is_intersected_into_the_existing_line() -> None:
    text, got = merge_requires_dist(META, ["scipy-openblas32>=0.3.30"], path="METADATA")
    assert got == ("scipy-openblas32<0.4,>=0.3.28,>=0.3.30",)
    assert reqs_of(text) == ["numpy>=1.25", "scipy-openblas32<0.4,>=0.3.28,>=0.3.30", 'foo>=1; extra == "foo"']
    assert text.endswith("Body text: Requires-Dist: not-a-header\n")


def test_an_exact_pin_that_admits_the_new_clauses_is_kept() -> None:
    """torchvision 0.26.0 pins torch==2.11.0; its classic C++ API asks for torch==2.11.*: the pin already says it."""
    meta = "Metadata-Version: 2.1\nName: tv\nVersion: 1\nRequires-Dist: torch==2.11.0\n\n"
    text, got = merge_requires_dist(meta, ["torch==2.11.*"], path="METADATA")
    assert text == meta and got == ("torch==2.11.0",)
    text, got = merge_requires_dist(meta, ["torch>=2.10"], path="METADATA")
    assert got == ("torch==2.11.0",)
    # a pin the new clause does not admit keeps both: the contradiction stays visible, for check to name
    text, got = merge_requires_dist(meta, ["torch==2.10.*"], path="METADATA")
    assert got == ("torch==2.10.*,==2.11.0",)


def test_absent_or_extra_only_projects_get_one_unconditional_line() -> None:
    text, got = merge_requires_dist(META, ["foo>=2", "bar[x]>=1", "bar>=1.5"], path="METADATA")
    assert got == ("foo>=2", "bar[x]>=1,>=1.5")
    assert reqs_of(text)[-2:] == ["foo>=2", "bar[x]>=1,>=1.5"]
    assert 'foo>=1; extra == "foo"' in reqs_of(text)  # the extra stays as it was


def test_merge_refuses_bad_metadata_naming_the_file() -> None:
    with pytest.raises(BadInputError, match="x.whl:METADATA"):
        merge_requires_dist("Name: a\nRequires-Dist: !!bad\n\n", ["foo"], path="x.whl:METADATA")


# ---------------------------------------------------------------------------------------------------- check rule


def check_notes_and_failures(
    tmp_path: Path,
    name: str,
    *,
    requires: tuple[str, ...],
    rpath: str | None = None,
    runpath: str | None = None,
    unknown: str = "note",  # a str: callers pass their other keywords as **dict[str, str]
) -> tuple[tuple[str, ...], list[str]]:
    files = {name: synth_elf(needed=(BLAS, "libc.so.6"), rpath=rpath, runpath=runpath)}
    whl = make_wheel(tmp_path, name="faiss", files=files, requires=requires)
    report = inspect_wheel(whl)
    v = check_wheel(report, make_policy(report, unknown="fail" if unknown == "fail" else "note"))
    return v.notes, [f"{f.exit_code:d} {f.message}" for f in v.failures]


@pytest.mark.parametrize(
    ("name", "elf_kw", "requires"),
    [
        ("faiss/_swigfaiss.abi3.so", {"rpath": "$ORIGIN/../scipy_openblas32/lib"}, ("scipy-openblas32>=0.3.28",)),
        (
            "faiss/_swigfaiss.abi3.so",
            {"runpath": "$ORIGIN/../faiss.libs:$ORIGIN/../scipy_openblas32/lib"},
            ("Scipy_OpenBLAS32",),
        ),
        ("_swigfaiss.abi3.so", {"runpath": "$ORIGIN/scipy_openblas32/lib"}, ("scipy-openblas32",)),
        (
            "faiss-1.0.data/platlib/faiss/_x.abi3.so",
            {"rpath": "$ORIGIN/../scipy_openblas32/lib"},
            ("scipy-openblas32",),
        ),
    ],
)
def test_check_accepts_a_library_in_an_rpath_folder_of_a_required_project(
    tmp_path: Path, name: str, elf_kw: dict[str, str], requires: tuple[str, ...]
) -> None:
    # offline (no index here) whether the folder holds it is not known: never a pass (41 S12), exit 19 of its own
    notes, failures = check_notes_and_failures(tmp_path / "fail", name, requires=requires, unknown="fail", **elf_kw)
    (failure,) = failures
    assert (
        failure.startswith("19 ")
        and "is not known (the index was not read: `slimwheel check` without --offline reads it)" in failure
    ), failure
    # a note where the user chose so (--unknown=note)
    notes, failures = check_notes_and_failures(tmp_path / "note", name, requires=requires, **elf_kw)
    assert failures == []
    assert any(
        f"needs {BLAS}: its RPATH entry" in n
        and "scipy" in n.lower()
        and "the index was not read: `slimwheel check` without --offline reads it" in n
        for n in notes
    ), notes


@pytest.mark.parametrize(
    ("elf_kw", "requires"),
    [
        ({"rpath": "$ORIGIN/../scipy_openblas32/lib"}, ()),  # no requirement
        ({"rpath": "$ORIGIN/../scipy_openblas32/lib"}, ('scipy-openblas32; extra == "blas"',)),  # only on request
        ({"rpath": "$ORIGIN/../scipy_openblas32/lib"}, ("scipy-openblas64",)),  # another project
        ({"rpath": "/opt/scipy_openblas32/lib"}, ("scipy-openblas32",)),  # absolute
        ({"rpath": "$ORIGIN/../../scipy_openblas32/lib"}, ("scipy-openblas32",)),  # outside site-packages
        ({"rpath": "$ORIGIN/scipy_openblas32/lib"}, ("scipy-openblas32",)),  # faiss/scipy_openblas32: the wheel's own
        ({"rpath": "$ORIGIN/../scipy_openblas32/lib", "runpath": "$ORIGIN"}, ("scipy-openblas32",)),  # RPATH ignored
    ],
)
def test_check_still_fails_otherwise(tmp_path: Path, elf_kw: dict[str, str], requires: tuple[str, ...]) -> None:
    _, failures = check_notes_and_failures(
        tmp_path, "faiss/_swigfaiss.abi3.so", requires=requires, unknown="fail", **elf_kw
    )
    # (absolute and outside-site-packages entries also fail as unsafe RPATH entries, item 5 of issue 12)
    (failure,) = [f for f in failures if "needs" in f]
    assert f"_swigfaiss.abi3.so needs {BLAS}: not in the wheel" in failure
    # with a requirement everywhere, its wheel may install the library (the loader takes it once loaded): offline
    # (no index here) that is not known, exit 19 of its own; with none, nothing can bring it, exit 12
    always = [r for r in requires if ";" not in r]
    assert failure.startswith("19 " if always else "12 "), failure


# ---------------------------------------------------------------------------------------------------- config


def test_config_table_string_and_inline_table() -> None:
    cfg = cfgmod.resolve(
        {
            "external-libs": {
                BLAS: "scipy-openblas32>=0.3.28",
                "libfoo.so.*": {"requirement": "foo>=1", "folder": "foo/lib"},
                "libbar.so.1": "bar@bar/lib",
            }
        }
    )
    assert cfg.external_libs == (
        f"{BLAS}=scipy-openblas32>=0.3.28",
        "libfoo.so.*=foo>=1@foo/lib",
        "libbar.so.1=bar@bar/lib",
    )
    assert parse_externals(cfg.external_libs, where="x")[1] == ext("libfoo.so.*", "foo>=1", folder="foo/lib")
    assert cfgmod.resolve().external_libs == ()


def test_config_from_the_environment() -> None:
    env = {"SLIMWHEEL_EXTERNAL_LIBS": f"{BLAS}=scipy-openblas32>=0.3.28,<0.4 ; libfoo.so.1=foo@f/lib"}
    cfg = cfgmod.resolve({}, env)
    assert cfg.external_libs == (f"{BLAS}=scipy-openblas32<0.4,>=0.3.28", "libfoo.so.1=foo@f/lib")


def test_config_problems_name_the_key_all_at_once() -> None:
    with pytest.raises(ConfigError) as e:
        cfgmod.resolve(
            {
                "external-libs": {
                    "libfoo.so.1": "foo>=>1",
                    "libbar.so.1": {"requirement": "bar", "folder": "../x"},
                    "libbaz.so.1": 3,
                    "libcudart.so.13": "nvidia-cuda-runtime",
                }
            }
        )
    text = "\n".join(e.value.problems)
    assert len(e.value.problems) == 4, text
    where = 'pyproject.toml [tool.slimwheel]: external-libs."'
    assert f"{where}libfoo.so.1\": requirement 'foo>=>1' for libfoo.so.1 does not parse" in text
    assert f"{where}libbar.so.1\": folder '../x'" in text
    assert f'{where}libbaz.so.1": expected a requirement string or' in text
    assert f'{where}libcudart.so.13": ' in text and "matches CUDA libraries" in text
    with pytest.raises(ConfigError, match="external-libs: expected a table SONAME -> requirement"):
        cfgmod.resolve({"external-libs": ["libfoo.so.1=foo"]})


def test_schema_describes_the_table() -> None:
    prop = cfgmod.json_schema()["properties"]["external-libs"]
    assert prop["type"] == "object" and prop["default"] == {}
    kinds = [alt["type"] for alt in prop["additionalProperties"]["oneOf"]]
    assert kinds == ["string", "object"]
    committed = json.loads((REPO / "slimwheel/resources/slimwheel.schema.json").read_text())
    assert committed["properties"]["external-libs"] == prop


def test_the_faiss_recipe_declares_the_requirement_its_metadata_provider_writes() -> None:
    # Two places name the scipy-openblas32 requirement: the dependency provider (the wheel's metadata) and the
    # external-libs entry (what repair merges in); they must agree so the merge leaves the line as written.
    spec = importlib.util.spec_from_file_location("faiss_requires", REPO / "faiss/build_support/faiss_requires.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cfg = cfgmod.load(REPO / "faiss", {}, {})
    (blas,) = parse_externals(cfg.external_libs, where="faiss")
    assert blas.pattern == BLAS and blas.folder == "scipy_openblas32/lib"
    meta = f"Name: f\nRequires-Dist: {mod.SCIPY_OPENBLAS32}\n\n"
    assert merge_requires_dist(meta, [blas.requirement], path="METADATA")[0] == meta
    assert check_can_tie(blas) is None


def test_offline_a_folder_not_named_like_a_requirement_is_said_to_be_unknown(tmp_path: Path) -> None:
    """tilelang 0.1.15: RPATH $ORIGIN/../../tvm_ffi/lib, which apache-tvm-ffi installs. Offline the wheel cannot show
    it: the failure says what is not known, not that no required project's folder holds the library."""
    _, failures = check_notes_and_failures(
        tmp_path,
        "tl/lib/libtl.so",
        requires=("apache-tvm-ffi>=0.1",),
        rpath="$ORIGIN/../../tvm_ffi/lib",
        unknown="fail",
    )
    (failure,) = [f for f in failures if "needs" in f]
    assert "its RPATH reaches tvm_ffi/lib, other projects' folders" in failure
    assert "offline it is not known whether a requirement installs it there" in failure
    assert failure.startswith("19 "), failure  # not known: exit 19, a note with --unknown note
    # with no requirement the plain failure stands (exit 12); with one, a folder of the wheel's own is not known either
    for requires, rpath, code in (
        ((), "$ORIGIN/../../tvm_ffi/lib", "12"),
        (("apache-tvm-ffi",), "$ORIGIN/../lib", "19"),
    ):
        _, failures = check_notes_and_failures(
            tmp_path, "tl/lib/libtl.so", requires=requires, rpath=rpath, unknown="fail"
        )
        (failure,) = [f for f in failures if "needs" in f]
        assert failure.startswith(f"{code} ") and "not in an RPATH folder of a required project" in failure, failure


def test_libraries_taken_to_be_in_one_required_folder_are_one_line() -> None:
    """auto-gptq 0.7.1 repaired for torch 2.2 (older than the torch tables): five modules, four torch libraries each,
    all through `$ORIGIN/../torch/lib`, were twenty "not known (offline: the index would tell)" lines, from a repair
    run that was not offline. One line per entry and requirement, saying the index was not read."""
    from slimwheel.deps import dependency_problems
    from slimwheel.inspect.dynamic import ElfInfo

    libs = ("libc10.so", "libtorch_cpu.so", "libtorch_python.so")
    elfs = [
        ElfInfo(
            path=f"m{i}/_k.so", soname=None, needed=(*libs, "libc.so.6"), rpath=("$ORIGIN/../torch/lib",), runpath=()
        )
        for i in range(5)
    ]
    v = dependency_problems(
        elfs, cuda_major=None, requires=["torch==2.2.*"], tags=["cp311-cp311-manylinux_2_28_x86_64"]
    )
    (line,) = v.unknown
    assert line.startswith(
        "m0/_k.so, m1/_k.so, m2/_k.so and 2 more need libc10.so, libtorch_cpu.so, libtorch_python.so:"
    )
    assert "their RPATH entry $ORIGIN/../torch/lib reaches a folder of Requires-Dist torch==2.2.*" in line
    assert line.endswith("(the index was not read: `slimwheel check` without --offline reads it)")


def test_of_two_required_folders_the_one_the_library_is_named_after_answers() -> None:
    """libraft-cu12 26.10 repaired with --external for librmm.so and librapids_logger.so has RPATH entries into both
    librmm/lib64 and rapids_logger/lib64: offline, librapids_logger.so was said to be in librmm-cu12's folder."""
    from slimwheel.deps import dependency_problems
    from slimwheel.inspect.dynamic import ElfInfo

    rpath = ("$ORIGIN/../../librmm/lib64", "$ORIGIN/../../rapids_logger/lib64")
    lib = ElfInfo(
        path="libraft/lib64/libraft.so",
        soname=None,
        needed=("librmm.so", "librapids_logger.so", "libc.so.6"),
        rpath=rpath,
        runpath=(),
    )
    reqs = ["librmm-cu12==26.10.*", "rapids-logger==0.3.*"]
    v = dependency_problems([lib], cuda_major=None, requires=reqs, tags=["py3-none-manylinux_2_28_x86_64"])
    said = " | ".join(v.unknown)
    assert (
        "needs librmm.so: its RPATH entry $ORIGIN/../../librmm/lib64 reaches a folder of Requires-Dist librmm-cu12"
        in said
    )
    assert (
        "needs librapids_logger.so: its RPATH entry $ORIGIN/../../rapids_logger/lib64 reaches a folder of Requires-Dist "
        "rapids-logger==0.3.*"
    ) in said, said
