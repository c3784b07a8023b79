"""`slimwheel container`'s configuration: what cibuildwheel gets, in both renderings, derived from [tool.slimwheel]."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
from cibuildwheel.environment import parse_environment
from hypothesis import given, settings
from hypothesis import strategies as st

from slimwheel import config as cfgmod
from slimwheel import container
from slimwheel.cli import main
from slimwheel.cuda.versions import CudaVersion
from slimwheel.errors import BadInputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
PROJECT = container.Project(path=Path("/p"), name="knn-cuda-example", import_name="knn")
CU12 = CudaVersion(12, 4)
CU13 = CudaVersion(13, 0)


def table(cuda: CudaVersion = CU13, **cfg: object) -> dict:
    return container.cibw_config(cfgmod.resolve(cfg), cuda, PROJECT, source=Path("/src/slimwheel"))


def test_cuda13_uses_the_pypi_toolkit_script_and_manylinux_2_28() -> None:
    t = table(CU13)
    assert t["manylinux-x86_64-image"] == "manylinux_2_28"
    assert t["before-all"] == "bash /slimwheel/scripts/manylinux-cuda13.sh 13.0"
    assert t["archs"] == ["x86_64"]
    assert "musllinux" in t["skip"]
    assert t["repair-wheel-command"] == "slimwheel repair --cuda 13.0 -w {dest_dir} {wheel}"
    assert t["test-command"] == 'python -c "import knn"'
    assert t["container-engine"] == {"name": "docker", "create-args": ["--volume", "/src/slimwheel:/slimwheel:ro"]}
    assert "CUDAHOSTCXX" not in t["environment"]  # CUDA 13 accepts the image's compiler
    # cibuildwheel refuses a PATH whose first `python` is not the build's: slimwheel's venv must not be on it
    assert "/opt/slimwheel" not in t["environment"]["PATH"]
    assert t["config-settings"]["cmake.define.SLIMWHEEL_CUDA_MAJOR"] == "13"


def test_cuda12_uses_nvidias_rpms_and_an_older_host_compiler() -> None:
    t = table(CU12)
    assert t["before-all"] == "bash /slimwheel/scripts/manylinux-cuda12.sh 12.4"
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


def test_the_before_all_scripts_exist_in_the_repo() -> None:
    for cuda in (CU12, CU13):
        script = table(cuda)["before-all"].split()[1].replace("/slimwheel/", "")
        assert (REPO / script).is_file(), script


def test_no_loader_reaches_the_repair_command() -> None:
    assert table(CU13, loader=False)["repair-wheel-command"].endswith(" --no-loader")


@pytest.mark.parametrize(
    ("cuda", "cfg", "needle"),
    [(CudaVersion(12, 8), {}, "12.4 and 13.0"), (CU13, {"link": "static"}, "link dynamically")],
)
def test_what_a_container_cannot_build_is_refused(cuda: CudaVersion, cfg: dict, needle: str) -> None:
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
    },
)


@settings(max_examples=60, deadline=None)
@given(cfg=configs, engine=st.sampled_from(["docker", "podman"]))
def test_toml_rendering_parses_back_to_the_same_table(cfg: dict, engine: str) -> None:
    t = container.cibw_config(cfgmod.resolve(cfg), CU13, PROJECT, engine=engine, source="/src/a b")
    assert tomllib.loads(container.render_toml(t))["tool"]["cibuildwheel"] == t


@settings(max_examples=60, deadline=None)
@given(cfg=configs, cuda=st.sampled_from([CU12, CU13]))
def test_env_rendering_means_the_same_to_cibuildwheel(cfg: dict, cuda: CudaVersion) -> None:
    t = container.cibw_config(cfgmod.resolve(cfg), cuda, PROJECT, source="/src/slimwheel")
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
    assert "export CIBW_BEFORE_ALL='bash /slimwheel/scripts/manylinux-cuda12.sh 12.4'" in out
    assert "-m cibuildwheel --platform linux --output-dir" in out


def test_print_config_json_is_versioned(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    rc = main(["container", str(REPO / "examples" / "knn"), "--print-config", "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert data["schema"] == 1
    assert data["env"]["CIBW_BEFORE_ALL"] == data["cibuildwheel"]["before-all"]


def test_extra_environment_reaches_the_container() -> None:
    t = container.cibw_config(cfgmod.resolve({}), CU13, PROJECT, extra_env={"FAISS_SOURCE_DIR": "/project/src"})
    assert t["environment"]["FAISS_SOURCE_DIR"] == "/project/src"
    with pytest.raises(BadInputError, match="not an environment variable name"):
        container.cibw_config(cfgmod.resolve({}), CU13, PROJECT, extra_env={"A-B": "x"})
    with pytest.raises(BadInputError, match="double quotes"):
        container.cibw_config(cfgmod.resolve({}), CU13, PROJECT, extra_env={"A": 'say "hi"'})
    spaced = container.cibw_config(cfgmod.resolve({}), CU13, PROJECT, extra_env={"A": "two words"})
    evaluated = parse_environment(container.render_env(spaced)["CIBW_ENVIRONMENT"]).as_dictionary({"PATH": "/b"})
    assert evaluated["A"] == "two words"


def test_the_release_comes_from_the_project_unless_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n[tool.slimwheel]\ncuda = "12.4"\n')
    assert main(["container", str(tmp_path), "--print-config", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["cibuildwheel"]["before-all"].endswith("manylinux-cuda12.sh 12.4")
    assert main(["container", str(tmp_path), "--cuda", "13.0", "--print-config", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["cibuildwheel"]["before-all"].endswith("manylinux-cuda13.sh 13.0")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n[tool.slimwheel]\ncuda = "12.8"\n')
    assert main(["container", str(tmp_path), "--print-config"]) == 3  # BAD_INPUT: not a container release
    assert "12.4 and 13.0" in capsys.readouterr().err



def test_malformed_pyproject_tables_are_bad_input_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('project = "x"\n')
    with pytest.raises(BadInputError, match="has no name"):
        container.load_project(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n[tool]\nscikit-build = "wheel"\n')
    assert container.load_project(tmp_path).import_name == "x"
