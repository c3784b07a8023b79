"""slimwheel.config: precedence, every problem at once, did-you-mean, and the committed JSON schema."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from slimwheel import config as cfgmod
from slimwheel.cli import main
from slimwheel.config import Config, load, resolve
from slimwheel.errors import BadInputError, ConfigError

REPO = Path(__file__).resolve().parents[2]


def test_defaults() -> None:
    cfg = resolve()
    assert cfg == Config()
    assert cfg.budget == "60MiB" and cfg.budget_bytes == 60 * 2**20 and cfg.libraries == ("cudart", "cublas")


def test_precedence_cli_over_env_over_file_over_defaults() -> None:
    file = {"budget": "10MiB", "archs": "8.0+", "ptx": "none", "link": "static"}
    env = {"SLIMWHEEL_BUDGET": "20MiB", "SLIMWHEEL_ARCHS": "7.5+", "PATH": "/usr/bin"}
    cli = {"budget": "30MiB", "archs": None}  # None: the flag was not given
    cfg = resolve(file, env, cli)
    assert cfg.budget == "30MiB"  # CLI
    assert cfg.archs == "7.5+"  # env over file, CLI None ignored
    assert (cfg.ptx, cfg.link) == ("none", "static")  # file
    assert cfg.compression == "auto"  # default


def test_env_values_are_coerced() -> None:
    cfg = resolve(
        {}, {"SLIMWHEEL_LOADER": "off", "SLIMWHEEL_EXTRA_SASS": "86;90a", "SLIMWHEEL_EXCLUDE_INTEGRATED": "0"}
    )
    assert cfg.loader is False and cfg.extra_sass == ("86", "90a") and cfg.exclude_integrated is False


def test_every_problem_is_reported_at_once_with_did_you_mean() -> None:
    with pytest.raises(ConfigError) as e:
        resolve(
            {"budgett": "1MiB", "compression": "tiny", "loader": "maybe", "extra-sass": [86]},
            {"SLIMWHEEL_ARCH": "8.0", "SLIMWHEEL_CACHE": "/tmp/x"},  # SLIMWHEEL_CACHE is not a config key: ignored
            {"budget": "lots"},
        )
    problems = e.value.problems
    assert len(problems) == 6, problems
    text = "\n".join(problems)
    assert "unknown key 'budgett' (did you mean \"budget\"?)" in text
    assert 'unknown variable SLIMWHEEL_ARCH (did you mean "archs"?)' in text
    assert "compression: 'tiny' is not one of auto, none, default, size, speed, balance" in text
    assert "loader: expected true or false" in text and "extra-sass: expected a list of strings" in text
    assert "cannot read 'lots' as a size" in text
    assert str(e.value).startswith("configuration: 6 problems:")
    assert e.value.exit_code == 3


def test_no_suggestion_for_a_far_name() -> None:
    with pytest.raises(ConfigError, match=r"unknown key 'zzzzzz'$"):
        resolve({"zzzzzz": 1})


def test_load_reads_pyproject_tool_table(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname="x"\n[tool.slimwheel]\nbudget = "99MB"\nloader = false\n')
    cfg = load(tmp_path, {"SLIMWHEEL_LOADER": "true"}, {})
    assert cfg.budget_bytes == 99 * 10**6 and cfg.loader is True
    assert load(tmp_path / "missing", {}, {}) == Config()


def test_load_bad_toml_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.slimwheel\n")
    with pytest.raises(BadInputError, match=r"pyproject\.toml: not valid TOML"):
        load(tmp_path, {}, {})


def test_schema_has_every_field_with_its_doc() -> None:
    schema = cfgmod.json_schema()
    assert set(schema["properties"]) == set(cfgmod.FIELDS)
    assert schema["additionalProperties"] is False
    assert all(p["description"] for p in schema["properties"].values())
    assert schema["properties"]["compression"]["enum"] == list(cfgmod.COMPRESSION_MODES)


def test_committed_schema_matches_the_model() -> None:
    committed = (REPO / "slimwheel" / "resources" / "slimwheel.schema.json").read_text()
    assert json.loads(committed) == cfgmod.json_schema(), (
        "slimwheel.schema.json drifted from the Config model: regenerate it with `slimwheel config --schema`"
    )
    assert committed == cfgmod.schema_text()


def test_unrelated_prefixed_variable_is_ignored_not_an_error() -> None:
    # SlimWheel.cmake's cache variables may sit in a CI environment; only near-misses of our keys are typos.
    cfg = resolve({}, {"SLIMWHEEL_CUDA_ARCHITECTURES": "90-real", "SLIMWHEEL_BUDGET": "10MiB"}, {})
    assert cfg.budget_bytes == 10 * 2**20


def test_load_a_tool_key_that_is_not_a_table_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("tool = 1\n")
    with pytest.raises(BadInputError, match=r"pyproject.toml: \[tool\] must be a table"):
        load(tmp_path, {}, {})


def test_config_command_refuses_a_missing_project_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from slimwheel.cli import main

    assert main(["config", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_a_bad_budget_names_where_it_was_set() -> None:
    with pytest.raises(ConfigError) as e:
        resolve({"budget": "-5"}, {}, {}, file_name="proj/pyproject.toml")
    assert e.value.problems[0].startswith("proj/pyproject.toml [tool.slimwheel]: budget: cannot read '-5'")
    with pytest.raises(ConfigError) as e:
        resolve({}, {"SLIMWHEEL_BUDGET": "abc"}, {})
    assert e.value.problems[0].startswith("environment SLIMWHEEL_*: budget: cannot read 'abc'")


def test_every_bad_value_is_reported_at_once() -> None:
    # Issue 12 item 12: a bad budget hid bad archs/cuda/ptx, and the plan reported only the first.
    with pytest.raises(ConfigError) as e:
        resolve(
            {"archs": "banana", "cuda": "99.1", "ptx": "x.y", "budget": "lots", "targets": "sm_", "require-arch": "z"},
            {},
            {},
            file_name="p/pyproject.toml",
        )
    text = "\n".join(e.value.problems)
    assert len(e.value.problems) == 6, text
    for key in ("archs", "cuda", "ptx", "budget", "targets", "require-arch"):
        assert f"p/pyproject.toml [tool.slimwheel]: {key}" in text


def test_config_command_refuses_bad_values_and_shows_origins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.slimwheel]\narchs = "banana"\ncuda = "99.1"\n')
    assert main(["config", str(tmp_path)]) == 3
    err = capsys.readouterr().err
    assert "archs: 'banana' is not a compute capability" in err and "99.1" in err
    (tmp_path / "pyproject.toml").write_text('[tool.slimwheel]\narchs = "8.0+"\n')
    monkeypatch.setenv("SLIMWHEEL_BUDGET", "70MiB")
    assert main(["config", str(tmp_path)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["config"]["archs"] == "8.0+" and data["origin"]["archs"].endswith("[tool.slimwheel]")
    assert data["origin"]["budget"] == "environment SLIMWHEEL_BUDGET" and data["origin"]["ptx"] == "default"
    assert data["config"]["cuda"] == "auto"


# ------------------------------------------------------------------------------------------- issue 24 item 8


@pytest.mark.parametrize("nest", [("[", "]"), ("{a = ", "}")])
def test_deeply_nested_toml_is_a_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nest: tuple[str, str]
) -> None:
    opened, closed = nest
    (tmp_path / "pyproject.toml").write_text(f"[tool.slimwheel]\narchs = {opened * 5000}1{closed * 5000}\n")
    assert main(["config", str(tmp_path)]) == 3
    err = capsys.readouterr().err
    assert f"{tmp_path / 'pyproject.toml'}: not valid TOML" in err and "RecursionError" not in err


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"extra-sass": ["-9.0"]}, "extra-sass = ['-9.0']: '-9.0' is not a GPU target"),
        ({"extra-sass": ["sm_86", "compute_90"]}, "extra SASS target compute_90 is PTX"),
        ({"libraries": ["cudart", "nope"]}, "libraries = ['cudart', 'nope']: no CUDA library named 'nope'"),
    ],
)
def test_list_settings_are_judged_by_the_plans_parsers_when_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], table: dict[str, list[str]], message: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        resolve(table)
    with pytest.raises(BadInputError):  # the same values, as the plan would have met them
        from slimwheel.cuda.arch import extra_sass_target
        from slimwheel.cuda.libs import check_component

        for v in table.get("extra-sass", []):
            extra_sass_target(v)
        for v in table.get("libraries", []):
            check_component(v)
    lines = "\n".join(f"{k} = {json.dumps(v)}" for k, v in table.items())
    (tmp_path / "pyproject.toml").write_text(f"[tool.slimwheel]\n{lines}\n")
    assert main(["config", str(tmp_path)]) == 3
    assert message in capsys.readouterr().err


def test_known_libraries_of_either_link_mode_pass() -> None:
    assert resolve({"libraries": ["cudart", "cuBLAS", "nvJitLink", "culibos"]}).libraries == (
        "cudart",
        "cuBLAS",
        "nvJitLink",
        "culibos",
    )


@pytest.mark.parametrize("key", ["archs", "budget", "libraries", "external-libs"])
def test_a_huge_string_is_refused_and_never_echoed_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    huge = "8." + "9" * 20_000_000
    value = {"libraries": [huge], "external-libs": {"libfoo.so.1": huge}}.get(key, huge)
    with pytest.raises(ConfigError) as e:
        resolve({key: value})
    assert len(str(e.value)) < 1000 and "20,000,002 characters" in str(e.value)
    monkeypatch.setenv("SLIMWHEEL_" + key.upper().replace("-", "_"), huge)
    (tmp_path / "pyproject.toml").write_text("[tool.slimwheel]\n")
    assert main(["config", str(tmp_path)]) == 3
    err = capsys.readouterr().err
    assert len(err) < 2000 and "20,000,002 characters" in err


def test_settings_with_a_syntax_are_carried_typed() -> None:
    # parsed once by the parsers config validates with; the plan and the checks take these, not the strings
    from slimwheel.cuda.arch import CC, CCRequest, Kind, Target

    cfg = resolve(
        {
            "archs": "8.0+",
            "ptx": "9.0",
            "budget": "10MiB",
            "installed-budget": "1GB",
            "extra-sass": ["90a"],
            "require-arch": "toolkit",
        }
    )
    p = cfg.parsed
    assert isinstance(p.archs, CCRequest) and p.archs.resolve([CC(7, 5), CC(8, 0), CC(9, 0)]) == (CC(8, 0), CC(9, 0))
    assert isinstance(p.ptx, CCRequest) and p.ptx.resolve() == (CC(9, 0),)
    assert p.targets == () and p.extra_sass == (Target.parse("90a", kind=Kind.SASS),)
    assert (p.budget_bytes, p.installed_budget_bytes, p.require_arch) == (10 * 2**20, 10**9, "toolkit")
    assert resolve({}).parsed.installed_budget_bytes is None and resolve({}).parsed.ptx == "newest"
    assert resolve({"targets": "80-real;90"}).parsed.targets == (
        Target.parse("sm_80"),
        Target.parse("sm_90"),
        Target.parse("compute_90"),
    )
    # the build's check requires what the plan wanted unless require-arch says otherwise
    assert resolve({}).require_arch_for((CC(9, 0), CC(8, 0))) == CCRequest.of([CC(8, 0), CC(9, 0)])
    assert str(resolve({}).require_arch_for((CC(9, 0), CC(8, 0)))) == "8.0,9.0"
    assert resolve({}).require_arch_for(None) == "auto" and cfg.require_arch_for((CC(9, 0),)) == "toolkit"
