"""The platform floor of a wheel: the GNU symbol versions its ELF files need (GLIBC_2.29, GLIBCXX_3.4.30, CXXABI,
GCC_*) against what a manylinux policy allows.

auditwheel's policy data (`auditwheel/policy/manylinux-policy.json`, read by `deps.policy.policy_data`) is the authority: for
each policy and machine it lists the versions a system of that policy provides, per prefix. A requirement whose
prefix the policy lists (GLIBC, GLIBCXX, CXXABI, GCC, ZLIB, LIBATOMIC) and whose version it does not list is newer
than the policy allows, exactly as `auditwheel show` decides the tag. Pure functions over `ElfReport`s.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from slimwheel.deps.policy import policy_data
from slimwheel.errors import BadInputError
from slimwheel.inspect.elf import ElfReport, VersionNeed
from slimwheel.shown import abbreviated

# ELF machine (pyelftools' name) -> the machine auditwheel's policies are keyed by
_POLICY_ARCH = {
    "EM_X86_64": "x86_64",
    "EM_AARCH64": "aarch64",
    "EM_386": "i686",
    "EM_PPC64": "ppc64le",
    "EM_S390": "s390x",
    "EM_ARM": "armv7l",
    "EM_RISCV": "riscv64",
}
# a platform tag's machine ("manylinux2014_x86_64"), which the policy's name leaves out
_ARCH_SUFFIX = re.compile(r"_(x86_64|aarch64|i686|ppc64le|s390x|armv7l|riscv64)$")
_SHOWN_SYMBOLS = 6  # symbols named per offending version; the rest are counted


@dataclass(frozen=True, kw_only=True)
class Policy:
    name: str  # manylinux_2_28
    priority: int  # auditwheel's: higher is older (more restrictive)
    versions: dict[str, dict[str, frozenset[str]]]  # machine -> prefix -> versions allowed


@dataclass(frozen=True, kw_only=True)
class Offender:
    """One symbol version a file needs that the target policy does not allow."""

    file: str
    need: VersionNeed
    allowed_newest: str  # the newest version of that prefix the policy allows ("" when it allows none)

    @property
    def prefix(self) -> str:
        return split_version(self.need.version)[0]

    def message(self, policy: str) -> str:
        syms = self.need.symbols
        listed = abbreviated((f"{s}@{self.need.version}" for s in syms), _SHOWN_SYMBOLS)
        what = listed if syms else f"version {self.need.version} (no symbol bound to it)"
        limit = f"{self.prefix} up to {self.allowed_newest}" if self.allowed_newest else f"no {self.prefix} version"
        return f"{self.file}: {what} of {self.need.library}: {policy} allows {limit}"


def split_version(version: str) -> tuple[str, str]:
    """("GLIBCXX", "3.4.30") of "GLIBCXX_3.4.30"; ("GLIBC", "PRIVATE") of "GLIBC_PRIVATE"; (name, "") without '_'."""
    prefix, sep, rest = version.partition("_")
    return (prefix, rest) if sep else (version, "")


def version_key(v: str) -> tuple[tuple[int, int | str], ...]:
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"[._]", v))


@functools.lru_cache(maxsize=1)
def policies() -> tuple[Policy, ...]:
    """auditwheel's manylinux policies, oldest first (the `linux` pseudo-policy left out); built once per process."""
    out = []
    for p in policy_data():
        if p["priority"] <= 0 or not p["name"].startswith("manylinux"):
            continue
        versions = {
            arch: {prefix: frozenset(vs) for prefix, vs in table.items()}
            for arch, table in p.get("symbol_versions", {}).items()
        }
        out.append(Policy(name=p["name"], priority=int(p["priority"]), versions=versions))
    return tuple(sorted(out, key=lambda p: -p.priority))


@functools.lru_cache(maxsize=1)
def _aliases() -> dict[str, str]:
    out: dict[str, str] = {}
    for p in policy_data():
        for a in p.get("aliases", []):
            out[a] = p["name"]
    return out


def parse_target(spec: str) -> Policy:
    """The policy of a `--manylinux` value: "2_28", "manylinux_2_28", "manylinux_2_28_x86_64", "manylinux2014"."""
    s = _ARCH_SUFFIX.sub("", spec.strip().lower())
    found = tag_policy(f"manylinux_{s}" if re.fullmatch(r"\d+_\d+", s) else s)
    if found is not None:
        return found
    known = ", ".join(p.name.removeprefix("manylinux_") for p in policies())
    raise BadInputError(f"--manylinux {spec!r}: not a manylinux policy auditwheel knows", hint=f"one of {known}")


def _allowed(policy: Policy, arch: str, need: VersionNeed) -> tuple[bool, str]:
    """(allowed, newest allowed of its prefix) for one requirement; prefixes the policy does not list are free
    (a library of the wheel's own, or one the dependency check judges). The newest is named only for a refusal."""
    if _admits(policy, arch, need.version):
        return True, ""
    prefix, _v = split_version(need.version)
    numeric = [v for v in policy.versions[arch][prefix] if re.fullmatch(r"[\d.]+", v)]
    return False, max(numeric, key=version_key) if numeric else ""


def arch_of(elfs: Iterable[ElfReport]) -> str | None:
    for e in elfs:
        if e.machine in _POLICY_ARCH:
            return _POLICY_ARCH[e.machine]
    return None


def offenders(elfs: Sequence[ElfReport], policy: Policy) -> tuple[Offender, ...]:
    """Every (file, version) a file needs that `policy` does not allow, in file then version order."""
    out = []
    for e in elfs:
        arch = _POLICY_ARCH.get(e.machine)
        if arch is None:
            continue
        for need in e.version_needs:
            ok, newest = _allowed(policy, arch, need)
            if not ok:
                out.append(Offender(file=e.name, need=need, allowed_newest=newest))
    return tuple(sorted(out, key=lambda o: (o.file, split_version(o.need.version)[0], version_key(o.need.version))))


def wheel_floor(elfs: Sequence[ElfReport]) -> Policy | None:
    """The oldest policy whose symbol versions every ELF file stays within (what `auditwheel show` would tag, as far
    as symbol versions decide it), or None when even the newest is exceeded or no file is of a known machine. Each
    distinct (machine, version) is asked once per policy: a wheel of 1,600 files (DALI) has a few dozen."""
    if arch_of(elfs) is None:
        return None
    needs = {(arch, need.version) for e in elfs if (arch := _POLICY_ARCH.get(e.machine)) for need in e.version_needs}
    for p in policies():
        if all(_admits(p, arch, version) for arch, version in needs):
            return p
    return None


def files_above(elfs: Sequence[ElfReport], policy: Policy) -> tuple[str, ...]:
    """The ELF files that need a symbol version `policy` does not allow (`offenders`' files, without the detail)."""
    return tuple(
        e.name
        for e in elfs
        if (arch := _POLICY_ARCH.get(e.machine)) and not all(_admits(policy, arch, n.version) for n in e.version_needs)
    )


def _admits(policy: Policy, arch: str, version: str) -> bool:
    """`_allowed`'s answer without the newest version it names."""
    prefix, value = split_version(version)
    table = policy.versions.get(arch, {})
    return prefix not in table or value in table[prefix]


def tag_policy(platform: str) -> Policy | None:
    """The manylinux policy a platform tag names ("manylinux1_x86_64", "manylinux2014_aarch64",
    "manylinux_2_28_x86_64"); None for any other tag (linux_*, musllinux_*, any) or one auditwheel does not know."""
    name = _ARCH_SUFFIX.sub("", platform.lower())
    name = _aliases().get(name, name)
    return next((p for p in policies() if p.name == name), None)


def below_floor(tags: Iterable[str], have: Policy | None) -> tuple[str, ...]:
    """The manylinux platforms of the wheel tags `tags` ("py3-none-manylinux1_x86_64") that promise older systems
    than the files' floor `have` (`wheel_floor`) allows: pip installs the wheel on such a system and its import fails
    ("version `GLIBC_2.34' not found"). auditwheel adds the tag of the floor but keeps such a tag (it replaces only
    linux_*)."""
    if have is None:
        return ()
    platforms = dict.fromkeys(t.rsplit("-", 1)[-1] for t in tags)
    return tuple(p for p in platforms if (tag := tag_policy(p)) is not None and tag.priority > have.priority)


def floor_to_json(elfs: Sequence[ElfReport]) -> dict[str, Any]:
    f = wheel_floor(elfs)
    return {"floor": f.name if f else None}
