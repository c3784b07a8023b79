"""Boolean environment variables on slimwheel's side: one vocabulary, one parser.

The run-time loader (slimwheel/runtime/loader.py, `env_flag`) ships inside built wheels without slimwheel, so it
carries its own copy of this vocabulary; tests/unit/test_runtime_loader_logic.py keeps the two in step.
"""

from __future__ import annotations

from collections.abc import Mapping

from slimwheel.errors import BadInputError

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


def parse_bool(value: str | None, *, name: str) -> bool | None:
    """`value` of the setting `name` as a boolean: 1/0, true/false, yes/no, on/off, in any case, spaces around it
    ignored. None or blank means "not set" (None), so the caller's default or a lower layer applies.

    Raises BadInputError naming the setting and the value for anything else.
    """
    if value is None or not value.strip():
        return None
    word = value.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise BadInputError(f"{name}={value!r} is not a boolean: use 1/0, true/false, yes/no or on/off (or leave it unset)")


def env_bool(env: Mapping[str, str], name: str, *, default: bool) -> bool:
    """The boolean environment variable `name` of `env`; unset or blank is `default`."""
    parsed = parse_bool(env.get(name), name=name)
    return default if parsed is None else parsed
