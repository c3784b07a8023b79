"""The manylinux allow-list: auditwheel's policy data, the system libraries a wheel may need, and the loaders."""

from __future__ import annotations

import functools
import importlib.resources
import importlib.util
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slimwheel.deps.installs import ARCH_PATTERN

# The dynamic loader is part of the C library; some libraries name it in DT_NEEDED (for __tls_get_addr) and every
# system has it, though auditwheel's whitelist does not list it.
SYSTEM_LOADERS = ("ld-linux*.so.*", "ld64.so.*", "ld-musl-*.so.1")


# ---------------------------------------------------------------------------------------------- manylinux allow-list


@functools.lru_cache(maxsize=1)
def policy_data() -> tuple[dict[str, Any], ...]:
    """auditwheel's manylinux policies, read from its package folder: importing `auditwheel.policy` to reach the
    file (importlib.resources) runs its modules, 177 ms and 2.5 MB here for one JSON file that check, slim and
    variants read on every wheel."""
    spec = importlib.util.find_spec("auditwheel")
    folders = spec.submodule_search_locations if spec is not None else None
    path = Path(folders[0], "policy", "manylinux-policy.json") if folders else None
    if path is not None and path.is_file():
        text = path.read_text("utf-8")
    else:  # auditwheel not installed as files (a zip): through its package
        text = importlib.resources.files("auditwheel.policy").joinpath("manylinux-policy.json").read_text("utf-8")
    return tuple(json.loads(text))


def known_platform(plat: str) -> bool:
    """Whether auditwheel's policies name this platform tag (`manylinux_2_28_x86_64`, an alias, `linux_x86_64`), so
    that `auditwheel repair --plat` takes it."""
    base = re.sub(rf"_{ARCH_PATTERN}$", "", plat)
    return any(base == p["name"] or base in p.get("aliases", []) for p in policy_data())


@dataclass(frozen=True, kw_only=True)
class SystemPolicy:
    name: str
    whitelist: frozenset[str]
    note: str | None = None


def system_policy(platforms: Sequence[str]) -> SystemPolicy:
    """The manylinux policy for the wheel's platform tags (auditwheel's policy data). Several manylinux tags: the
    oldest (most restrictive) applies, because pip may install the wheel there; no manylinux tag: the newest."""
    policies = [p for p in policy_data() if p["priority"] > 0]
    by_name: dict[str, dict[str, Any]] = {}
    for p in policies:
        by_name[p["name"]] = p
        for alias in p.get("aliases", []):
            by_name[alias] = p
    matched = []
    for plat in platforms:
        m = re.fullmatch(rf"(manylinux\w*?)_{ARCH_PATTERN}", plat)
        if m and m.group(1) in by_name:
            matched.append(by_name[m.group(1)])
    if matched:
        p = max(matched, key=lambda p: p["priority"])
        return SystemPolicy(name=p["name"], whitelist=frozenset(p["lib_whitelist"]))
    newest = min(policies, key=lambda p: p["priority"])
    return SystemPolicy(
        name=newest["name"],
        whitelist=frozenset(newest["lib_whitelist"]),
        note=f"no manylinux platform tag ({', '.join(platforms) or 'none'}): system libraries were checked "
        f"against {newest['name']}'s list",
    )
