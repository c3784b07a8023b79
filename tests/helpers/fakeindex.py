"""A package index as a dict (a `reqgraph.Lookup`), for the tests of the requirement graph and of what repair and
check make of it: no network; tests/unit/test_pypindex.py reads a real index over HTTP."""

from __future__ import annotations

from collections.abc import Mapping

from packaging.requirements import Requirement

from slimwheel.reqgraph import LookupFailed, WheelFacts, Why


def facts(name: str, version: str = "1.0", files: tuple[str, ...] = (), requires: tuple[str, ...] = ()) -> WheelFacts:
    """What the index says one wheel of `name` installs and requires."""
    return WheelFacts(project=name, version=version, filename=f"{name}-{version}.whl", files=files, requires=requires)


class FakeIndex:
    """The wheels of `index` by project name; a project not there has no wheel, one in `failing` cannot be reached.
    `asked`: every project looked up, in order."""

    def __init__(self, index: Mapping[str, WheelFacts], failing: frozenset[str] = frozenset()) -> None:
        self.index, self.failing = index, failing
        self.asked: list[str] = []

    def __call__(self, req: Requirement) -> WheelFacts:
        self.asked.append(req.name)
        if req.name in self.failing:
            raise LookupFailed("no route to the index", why=Why.UNREACHABLE)
        if req.name not in self.index:
            raise LookupFailed(f"no wheel of {req.name}", why=Why.NOT_FOUND)
        return self.index[req.name]
