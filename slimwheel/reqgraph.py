"""What a wheel's requirements install, and their requirements in turn: the libraries that a requirement's
requirement brings. rmm-cu12 26.10's extension modules need librapids_logger.so; no Requires-Dist of rmm-cu12 is
named after it, but rmm-cu12 requires librmm-cu12, which requires rapids-logger, which installs
rapids_logger/lib64/librapids_logger.so. pylibraft-cu12 needs libcusolver.so.11 through libraft-cu12, which requires
cuda-toolkit[cusolver,...]==12.*.

Pure: the graph is walked breadth first over a `Lookup` (a function from a requirement to the facts of the wheel pip
would pick for it), which the caller supplies: `pypindex.lookup` reads them from the package index. The walk starts on
first use (`RequirementGraph.provider`), so a wheel whose libraries the direct rules account for costs nothing.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from slimwheel.cuda.libs import content_hash
from slimwheel.wheelfile import parse_requirements

# Every project is walked, torch too: its rules (torchext's tables) come first in deps, and the walk answers for
# releases newer than those tables (vllm 0.34 requires torch 2.14, whose cudart the tables do not know).
MAX_PROJECTS = 256  # projects read at most for one wheel (vllm 0.34 requires 61, and they theirs)
MAX_DEPTH = 6  # requirement hops from the wheel
WORKERS = 8  # lookups of one level of the walk at once (each is one or two HTTP requests)


@dataclass(frozen=True, kw_only=True)
class WheelFacts:
    """What one wheel of a project installs and requires, as its archive says."""

    project: str  # canonical name
    version: str
    filename: str
    # install paths relative to site-packages (a .data/purelib|platlib prefix removed) of its shared libraries
    # (`is_library`): the walk asks for nothing else, and a wheel of 100,000 data files costs no more to hold
    files: tuple[str, ...]
    requires: tuple[str, ...]  # its Requires-Dist lines


def is_library(path: str) -> bool:
    """Whether an install path may be a shared library some file needs by name (`libfoo.so`, `libfoo.so.12`,
    `_C.cpython-312-x86_64-linux-gnu.so`): the files of a wheel the walk keeps."""
    return ".so" in path.rsplit("/", 1)[-1]


class Why(enum.Enum):
    """Why a requirement's wheel could not be learned: the kinds a verdict may word or weigh differently. None of
    them is an answer about the wheel: each means "unknown"."""

    UNREACHABLE = "unreachable"  # no answer: no network, a refused connection, a read that waited too long
    DEADLINE = "deadline"  # the request's or the run's deadline passed before the answer was whole
    TOO_LARGE = "too-large"  # an answer, or the run's answers together, over their byte limits
    BAD_ANSWER = (
        "bad-answer"  # an answer that says nothing: an HTTP error, a broken listing, a truncated body, no wheel
    )
    REFUSED = "refused"  # not asked, by rule: a file: URL, a redirect to another host, a direct reference, no index
    NOT_FOUND = "not-found"  # the index answered: no such project, or no wheel of it for this platform and specifier
    NOT_READ = "not-read"  # the walk's own bound (`MAX_PROJECTS`) left it unread


class LookupFailed(Exception):
    """The index could not say which wheel a requirement installs (offline, no such project, no wheel for this
    platform); the message says why, for the verdict, and `why` says of which kind."""

    def __init__(self, message: str, *, why: Why) -> None:
        super().__init__(message)
        self.why = why


@dataclass(frozen=True, kw_only=True)
class Unread:
    """A requirement whose wheel the walk could not read: what the verdict cannot know."""

    project: str  # canonical name
    why: Why
    detail: str  # the lookup's message

    def __str__(self) -> str:
        return f"{self.project}: {self.detail}"


Lookup = Callable[[Requirement], WheelFacts]


@dataclass(frozen=True, kw_only=True)
class Provider:
    """A library a requirement's requirement installs."""

    soname: str
    path: str  # where that wheel installs it, relative to site-packages
    project: str
    version: str
    chain: tuple[str, ...]  # the requirements from the wheel to that project, in order, without their markers

    def how(self) -> str:
        """ "requires libraft-cu12==26.10.*, which requires rapids-logger==0.3.*"."""
        return "requires " + ", which requires ".join(self.chain)


def install_path(member: str) -> str | None:
    """Where a wheel member installs relative to site-packages: itself, or without `<name>.data/purelib/` (or
    platlib); None for members that install elsewhere (scripts, headers, data) and for the dist-info's own files."""
    parts = member.split("/")
    if parts[0].endswith(".data"):
        if len(parts) > 2 and parts[1] in ("purelib", "platlib"):
            return "/".join(parts[2:])
        return None
    if parts[0].endswith(".dist-info") or member.endswith("/"):
        return None
    return member


def _short(req: Requirement) -> str:
    """A requirement as the chain shows it: name, extras and specifier (the marker held, or it would not be there)."""
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    return f"{req.name}{extras}{req.specifier}"


def _holds(marker: Marker | None, envs: Iterable[dict[str, str]], extras: frozenset[str]) -> bool:
    """Whether a requirement of a project installed with `extras` is installed in every environment."""
    if marker is None:
        return True
    return all(any(marker.evaluate({**env, "extra": e}) for e in ("", *extras)) for env in envs)


class RequirementGraph:
    """The requirements of a wheel and, transitively, theirs, read on first use. `requires`: the wheel's
    Requires-Dist; `envs`: the environments it installs into (`deps.Installs.environments`): a requirement counts when
    its marker holds in every one of them, as `deps.Requirements` counts the wheel's own."""

    def __init__(
        self,
        requires: Iterable[str],
        envs: list[dict[str, str]],
        lookup: Lookup,
        *,
        max_projects: int = MAX_PROJECTS,
        max_depth: int = MAX_DEPTH,
    ) -> None:
        self._requires = tuple(requires)
        self._envs = envs
        self._lookup = lookup
        self._max_projects = max_projects
        self._max_depth = max_depth
        self._by_name: dict[str, Provider] | None = None
        self._unread: list[Unread] = []

    @property
    def unread(self) -> tuple[str, ...]:
        """The requirements the walk could not read, each with why ("librmm-cu12: no route to the index")."""
        return tuple(map(str, self.unknown))

    @property
    def unknown(self) -> tuple[Unread, ...]:
        """`unread` as typed values: which project, of which kind (`Why`), and the message. Empty only when every
        requirement the walk met was read: then `provider` answering None means no requirement installs the
        library; otherwise it may mean only that the library is in a wheel that could not be read."""
        self._walk()
        return tuple(self._unread)

    def provider(self, soname: str) -> Provider | None:
        """The nearest requirement (fewest hops, then Requires-Dist order) whose wheel installs a file named
        `soname`; None when none does (or none could be read: `unread`)."""
        return self._walk().get(soname)

    def shared_copy(self, member: str) -> Provider | None:
        """The nearest requirement whose wheel ships the same bundled library as the wheel's `member`: a file of the
        same name, where that name carries auditwheel's content hash (`cuda.libs.content_hash`). spconv-cu126 and its
        requirement cumm-cu126 both ship `libcudart-53d54daa.so.12.6.68`, and a process that imports both maps it
        once. None for a name with no such hash (its bytes are unknown) or that no requirement ships."""
        base = member.rsplit("/", 1)[-1]
        return self.provider(base) if content_hash(base) is not None else None

    def _walk(self) -> dict[str, Provider]:
        """Breadth first, a level at a time; the lookups of one level run at once (`WORKERS`), the level is then
        taken in order, so the result is what a one-by-one walk gives."""
        if self._by_name is not None:
            return self._by_name
        found: dict[str, Provider] = {}
        roots, _bad = parse_requirements(self._requires)
        level: list[tuple[Requirement, tuple[str, ...]]] = [
            (r, (_short(r),)) for r in roots if _holds(r.marker, self._envs, frozenset())
        ]
        seen: dict[str, frozenset[str]] = {}  # project -> the extras walked
        facts_of: dict[str, WheelFacts] = {}
        while level:
            got = self._read_level(level, seen, facts_of)
            following: list[tuple[Requirement, tuple[str, ...]]] = []
            for req, chain in level:
                name = str(canonicalize_name(req.name))
                extras = frozenset(str(canonicalize_name(e)) for e in req.extras)
                if name in seen and extras <= seen[name]:
                    continue
                new_extras = extras - seen.get(name, frozenset())
                first = name not in seen
                seen[name] = seen.get(name, frozenset()) | extras
                if first:
                    outcome = got.get(name)
                    if outcome is None:
                        detail = f"not read, {self._max_projects} projects were read already"
                        self._unread.append(Unread(project=name, why=Why.NOT_READ, detail=detail))
                        continue
                    if isinstance(outcome, LookupFailed):
                        self._unread.append(Unread(project=name, why=outcome.why, detail=str(outcome)))
                        continue
                    facts_of[name] = facts = outcome
                    for path in facts.files:
                        base = path.rsplit("/", 1)[-1]
                        if is_library(path) and base not in found:
                            found[base] = Provider(
                                soname=base, path=path, project=name, version=facts.version, chain=chain
                            )
                elif name not in facts_of:
                    continue
                if len(chain) >= self._max_depth:
                    continue
                walked = seen[name] if first else new_extras
                for r in parse_requirements(facts_of[name].requires)[0]:
                    if not first and (r.marker is None or "extra" not in str(r.marker)):
                        continue  # walked when the project was first met
                    if _holds(r.marker, self._envs, walked):
                        following.append((r, (*chain, _short(r))))
            level = following
        self._by_name = found
        return found

    def _read_level(
        self,
        level: list[tuple[Requirement, tuple[str, ...]]],
        seen: dict[str, frozenset[str]],
        facts_of: dict[str, WheelFacts],
    ) -> dict[str, WheelFacts | LookupFailed]:
        """The facts (or why not) of each project this level meets first, read at once, within `max_projects`."""
        wanted: dict[str, Requirement] = {}
        for req, _chain in level:
            name = str(canonicalize_name(req.name))
            if name not in seen and name not in wanted:
                wanted[name] = req
        room = max(0, self._max_projects - len(facts_of))
        names = list(wanted)[:room]

        def one(name: str) -> WheelFacts | LookupFailed:
            try:
                return self._lookup(wanted[name])
            except LookupFailed as exc:
                return exc

        if len(names) <= 1:
            return {n: one(n) for n in names}
        with ThreadPoolExecutor(max_workers=min(WORKERS, len(names))) as pool:
            return dict(zip(names, pool.map(one, names), strict=True))
