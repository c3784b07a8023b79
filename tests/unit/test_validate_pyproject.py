"""validate-pyproject checks [tool.slimwheel] through slimwheel's registered schema plugin (entry point
`validate_pyproject.tool_schema`), accepting the repository's real projects and rejecting bad tables."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from validate_pyproject import api, errors, plugins

from slimwheel import config as cfgmod
from slimwheel.resources import tool_schema

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
PROJECTS = [REPO / "examples" / "knn", REPO / "faiss", REPO / "tests" / "packages" / "static-knn", REPO]
BASE = {"project": {"name": "x", "version": "1"}}


@functools.cache
def shared() -> api.Validator:
    return api.Validator()  # compiling the schemas takes seconds; checking a document, microseconds


@pytest.fixture
def validator() -> api.Validator:
    return shared()


def with_table(table: Any) -> dict[str, Any]:
    return {**BASE, "tool": {"slimwheel": table}}


def test_the_plugin_is_registered_under_the_tool_name() -> None:
    found = {p.tool: p for p in plugins.list_from_entry_points()}
    assert "slimwheel" in found
    assert found["slimwheel"].schema == tool_schema() == cfgmod.json_schema()


@pytest.mark.parametrize("project", PROJECTS, ids=lambda p: p.name)
def test_the_repositorys_projects_validate(validator: api.Validator, project: Path) -> None:
    data = tomllib.loads((project / "pyproject.toml").read_text())
    validator(data)


@pytest.mark.parametrize(
    ("table", "needle"),
    [
        ({"arch": "all"}, "arch"),  # a typo of archs
        ({"budget": 60}, "budget"),  # a number, not "60MiB"
        ({"compression": "tiny"}, "compression"),
        ({"loader": "yes"}, "loader"),
        ({"libraries": "cudart"}, "libraries"),  # a string where a list belongs
        ({"external-libs": {"libfoo.so": {"folder": "foo/lib"}}}, "external-libs"),  # no requirement
        ({"external-libs": {"libfoo.so": {"requirement": "foo", "extra": 1}}}, "external-libs"),
    ],
)
def test_bad_tables_are_rejected_naming_the_key(validator: api.Validator, table: dict[str, Any], needle: str) -> None:
    with pytest.raises(errors.ValidationError) as e:
        validator(with_table(table))
    assert "tool.slimwheel" in str(e.value) and needle in str(e.value)


@settings(max_examples=50, deadline=None)
@given(st.from_regex(r"[a-z][a-z0-9-]{0,15}", fullmatch=True).filter(lambda k: k not in cfgmod.FIELDS))
def test_every_unknown_key_is_rejected(key: str) -> None:
    with pytest.raises(errors.ValidationError):
        shared()(with_table({key: "x"}))


@settings(max_examples=50, deadline=None)
@given(
    st.fixed_dictionaries(
        {},
        optional={
            "cuda": st.sampled_from(["auto", "13.0", "12.4"]),
            "archs": st.sampled_from(["all", "7.5-12.0", "8.0+"]),
            "compression": st.sampled_from(list(cfgmod.COMPRESSION_MODES)),
            "loader": st.booleans(),
            "libraries": st.lists(st.sampled_from(["cudart", "cublas", "curand"]), unique=True),
            "budget": st.sampled_from(["60MiB", "100MB"]),
        },
    )
)
def test_what_the_config_model_accepts_validate_pyproject_accepts(table: dict[str, Any]) -> None:
    cfgmod.resolve(table)  # the model takes it ...
    shared()(with_table(table))  # ... and so does the schema it generates
