"""Data files of the package: the JSON schema of [tool.slimwheel] (generated from the config model, drift-tested)
and the container scripts (manylinux/). `tool_schema` is validate-pyproject's plugin for [tool.slimwheel]."""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any

SCHEMA_FILE = "slimwheel.schema.json"


def tool_schema(tool_name: str = "slimwheel") -> dict[str, Any]:
    """The JSON schema validate-pyproject checks `[tool.$tool]` with (entry point `validate_pyproject.tool_schema`).

    Read from the committed file rather than generated here, so validating a pyproject.toml never imports the config
    model; tests/unit/test_config.py keeps the file equal to `slimwheel.config.json_schema()`."""
    schema: dict[str, Any] = json.loads(files(__name__).joinpath(SCHEMA_FILE).read_text(encoding="utf-8"))
    return schema
