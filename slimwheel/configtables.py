"""Table-valued settings of `[tool.slimwheel]` (external-libs, gpu-intent), validated entry by entry, and how a
setting's value is quoted in messages: config's helpers for the structured keys, apart so that config stays one
module of the loader's rules."""

from __future__ import annotations

import json
import reprlib
from collections.abc import Mapping
from typing import Any

from slimwheel.cuda.arch import CCRequest, parse_cc_request
from slimwheel.errors import BadInputError

# Values quoted in messages: a 20 MB string or a list nested 900 deep is shown by its head and its size, never whole.
REPR = reprlib.Repr()  # keyword arguments only from Python 3.12
REPR.maxlevel, REPR.maxstring, REPR.maxother = 3, 120, 120
REPR.maxlist = REPR.maxtuple = REPR.maxdict = 8


def shown(value: Any) -> str:
    """A value as messages quote it: repr, shortened (reprlib) with the full length said when anything was cut."""
    text = REPR.repr(value)
    if isinstance(value, str) and len(value) > REPR.maxstring:
        text += f" ({len(value):,} characters)"
    return text


def coerce_externals(value: Any, where: str, *, from_env: bool, problems: list[str]) -> tuple[str, ...] | None:
    """external-libs as `SONAME=REQUIREMENT[@FOLDER]` strings, each validated; every bad entry is a problem."""
    from slimwheel.external import external_lib, parse_external  # loads only when this key is used

    out: list[str] = []
    bad = len(problems)
    if from_env and isinstance(value, str):
        for text in (t for t in value.split(";") if t.strip()):
            try:
                out.append(parse_external(text, where=where).spec())
            except BadInputError as e:
                problems.append(str(e))
    elif isinstance(value, Mapping):
        for soname, v in value.items():
            at = f"{where}.{json.dumps(soname)}"
            if isinstance(v, Mapping) and set(v) <= {"requirement", "folder"} and isinstance(v.get("requirement"), str):
                requirement, folder = v["requirement"], v.get("folder")
                if folder is not None and not isinstance(folder, str):
                    problems.append(f"{at}: folder must be a string, got {shown(folder)}")
                    continue
            elif isinstance(v, str):
                requirement, sep, folder = v.rpartition("@")
                requirement, folder = (requirement, folder) if sep else (v, None)
            else:
                problems.append(
                    f'{at}: expected a requirement string or {{requirement = "...", folder = "..."}}, got {shown(v)}'
                )
                continue
            try:
                out.append(external_lib(str(soname), requirement, folder, where=at).spec())
            except BadInputError as e:
                problems.append(str(e))
    else:
        problems.append(f"{where}: expected a table SONAME -> requirement, got {shown(value)}")
    return tuple(out) if len(problems) == bad else None


def coerce_intent(value: Any, where: str, problems: list[str]) -> tuple[str, ...] | None:
    """gpu-intent as `GLOB=REQUEST` strings: a table glob -> coverage request (or such entries joined by ";" from the
    environment); each request parsed by the one parser of coverage requests; every bad entry is a problem."""
    bad = len(problems)
    if isinstance(value, str):
        pairs: list[tuple[str, Any]] = []
        for text in (t.strip() for t in value.split(";") if t.strip()):
            glob, sep, request = text.rpartition("=")
            if not sep:
                problems.append(f"{where}: {shown(text)} is not GLOB=REQUEST (e.g. mypkg/_sm80*.so=8.0+)")
            else:
                pairs.append((glob.strip(), request.strip()))
    elif isinstance(value, Mapping):
        pairs = list(value.items())
    else:
        problems.append(f"{where}: expected a table file glob -> compute capabilities, got {shown(value)}")
        return None
    out: list[str] = []
    for glob, request in pairs:
        at = f"{where}.{json.dumps(str(glob))}"
        if not isinstance(glob, str) or not glob.strip() or "=" in glob:
            problems.append(f"{at}: a file glob must be a non-empty string without '='")
        elif not isinstance(request, str):
            problems.append(f'{at}: expected compute capabilities such as "8.0+" or "8.0-9.0", got {shown(request)}')
        else:
            try:
                parse_cc_request(request)
            except BadInputError as e:
                problems.append(f"{at}: {e.message}")
                continue
            out.append(f"{glob}={request}")
    return tuple(out) if len(problems) == bad else None


def intent_table(entries: tuple[str, ...]) -> tuple[tuple[str, CCRequest], ...]:
    """gpu-intent's entries (validated by `resolve`) as (glob, request) pairs, in order."""
    return tuple((glob, parse_cc_request(req)) for glob, _sep, req in (e.rpartition("=") for e in entries))
