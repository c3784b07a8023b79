"""GPU compute capabilities, compilation targets, binary compatibility and the architecture plan.

Facts encoded here (shared/cuda-facts.md, section 3):
- SASS for X.Y runs on every GPU of the same major X with minor >= Y; `a` SASS only on exactly X.Y;
  `f` SASS on the family (same major, minor >= Y).
- PTX for compute_XY is JIT-compiled by the driver for any CC >= X.Y; `a`/`f` PTX keeps the SASS rule.
- Integrated (Tegra/Jetson/Thor, GB10) GPUs are aarch64 systems: an x86_64 wheel can never run on them.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from slimwheel.errors import BadInputError

_CC_DOTTED = re.compile(r"([0-9]{1,2})\.([0-9])", re.ASCII)
_CC_NUMBER = re.compile(r"([0-9]{2,3})", re.ASCII)


@dataclass(frozen=True, order=True)
class CC:
    """A compute capability, e.g. CC(9, 0)."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    @property
    def sm(self) -> str:
        """The number nvcc uses: 90, 100, 121."""
        return f"{self.major}{self.minor}"

    @classmethod
    def parse(cls, text: str) -> CC:
        """Accepts "9.0", "90", "sm_90", "compute_90", "120", "12.1".

        ASCII digits only, and a major of at most two digits (NVIDIA's run 1 to 12): `\\d` would also take
        Arabic-Indic or fullwidth digits, and an unbounded major made "1.0-999999.0" a range and a 5,000-digit
        major a crash in int()."""
        t = str(text).strip().lower()
        t = re.sub(r"^(sm_|compute_|lto_)", "", t)
        m = _CC_DOTTED.fullmatch(t)
        if m:
            return cls(int(m.group(1)), int(m.group(2)))
        m = _CC_NUMBER.fullmatch(t)
        if m:
            n = m.group(1)
            return cls(int(n[:-1]), int(n[-1]))
        raise BadInputError(
            f"{text!r} is not a compute capability", hint="write e.g. 8.6, 86 or sm_86 (a major of one or two digits)"
        )


@dataclass(frozen=True)
class GpuGeneration:
    cc: CC
    name: str
    integrated: bool = False  # Tegra / Jetson / Thor / GB10: aarch64 systems only


# Every compute capability a shipped NVIDIA GPU has had, Maxwell on. 10.1 was Thor's number before CUDA 13
# renamed it 11.0; it is kept out so that coverage tables do not count one product twice.
GENERATIONS: tuple[GpuGeneration, ...] = (
    GpuGeneration(CC(5, 0), "Maxwell (GTX 750)"),
    GpuGeneration(CC(5, 2), "Maxwell (GTX 9xx, M40)"),
    GpuGeneration(CC(5, 3), "Jetson Nano/TX1", integrated=True),
    GpuGeneration(CC(6, 0), "Pascal (P100)"),
    GpuGeneration(CC(6, 1), "Pascal (GTX 10xx, P40)"),
    GpuGeneration(CC(6, 2), "Jetson TX2", integrated=True),
    GpuGeneration(CC(7, 0), "Volta (V100)"),
    GpuGeneration(CC(7, 2), "Jetson Xavier", integrated=True),
    GpuGeneration(CC(7, 5), "Turing (T4, RTX 20xx)"),
    GpuGeneration(CC(8, 0), "Ampere (A100)"),
    GpuGeneration(CC(8, 6), "Ampere (A10, RTX 30xx)"),
    GpuGeneration(CC(8, 7), "Jetson Orin", integrated=True),
    GpuGeneration(CC(8, 9), "Ada (L4, L40, RTX 40xx)"),
    GpuGeneration(CC(9, 0), "Hopper (H100, H200)"),
    GpuGeneration(CC(10, 0), "Blackwell (B200, GB200)"),
    GpuGeneration(CC(10, 3), "Blackwell Ultra (B300)"),
    GpuGeneration(CC(11, 0), "Thor", integrated=True),
    GpuGeneration(CC(12, 0), "Blackwell (RTX 50xx, RTX PRO)"),
    GpuGeneration(CC(12, 1), "GB10 (DGX Spark)", integrated=True),
)
KNOWN_CCS: tuple[CC, ...] = tuple(g.cc for g in GENERATIONS)
# Kepler: real GPUs that CUDA 11.8 still targets (sm_35, sm_37) and old wheels carry code for (dgl-cu111 0.6.1), but
# no driver after R470 runs: a request may name them, while coverage lines, plans and checks count Maxwell on only.
RETIRED: tuple[GpuGeneration, ...] = (
    GpuGeneration(CC(3, 0), "Kepler (GTX 6xx, K10)"),
    GpuGeneration(CC(3, 2), "Jetson TK1", integrated=True),
    GpuGeneration(CC(3, 5), "Kepler (K20, K40, GTX 780)"),
    GpuGeneration(CC(3, 7), "Kepler (K80)"),
)
_BY_CC = {g.cc: g for g in GENERATIONS}


def generation(cc: CC) -> GpuGeneration | None:
    return _BY_CC.get(cc)


def require_known(ccs: Iterable[CC], *, what: str) -> None:
    """Refuse compute capabilities no GPU has (9.5; 8.8 and 10.1, which nvcc accepts, too), listing the real ones and
    which of them are integrated aarch64 parts: slimming a wheel for a GPU that does not exist only loses code."""
    retired = {g.cc for g in RETIRED}
    unknown = sorted({cc for cc in ccs if generation(cc) is None and cc not in retired})
    if not unknown:
        return
    real = ", ".join(str(g.cc) for g in GENERATIONS if not g.integrated)
    integrated = ", ".join(f"{g.cc} ({g.name})" for g in (*RETIRED, *GENERATIONS) if g.integrated)
    kepler = ", ".join(str(g.cc) for g in RETIRED if not g.integrated)
    raise BadInputError(
        f"{what}: no GPU has compute capability {', '.join(map(str, unknown))}",
        hint=f"GPUs: {real}; Kepler, up to CUDA 11.8: {kepler}; integrated aarch64 GPUs (wheels for aarch64 only): "
        f"{integrated}",
    )


def counted(cc: CC, *, exclude_integrated: bool) -> bool:
    """Whether a CC counts in plans, checks and coverage lines: a GPU we know of (nvcc also accepts numbers no
    product has, like 8.8 and 10.1), and not an integrated one when those are left out. The one rule behind the
    plan's wanted set, its coverage line and check's required set, so that their counts agree."""
    gen = generation(cc)
    return gen is not None and not (exclude_integrated and gen.integrated)


class Kind(str, enum.Enum):
    SASS = "sass"
    PTX = "ptx"


class Variant(str, enum.Enum):
    """`a`: arch-specific (exactly this CC); `f`: family-specific (CUDA 12.9+)."""

    PLAIN = ""
    ARCH = "a"
    FAMILY = "f"


@dataclass(frozen=True, order=True)
class Target:
    """One compilation target: SASS (a cubin) or PTX for one compute capability."""

    cc: CC
    kind: Kind = Kind.SASS
    variant: Variant = Variant.PLAIN

    @property
    def arch(self) -> str:
        """nvcc's spelling: 90, 90a, 100f."""
        return f"{self.cc.sm}{self.variant.value}"

    def __str__(self) -> str:
        return f"{'sm' if self.kind is Kind.SASS else 'compute'}_{self.arch}"

    @property
    def cmake(self) -> str:
        """CMake CUDA_ARCHITECTURES spelling: 90-real (SASS) or 90-virtual (PTX)."""
        return f"{self.arch}-{'real' if self.kind is Kind.SASS else 'virtual'}"

    def runs_on(self, gpu: CC) -> bool:
        if self.variant is Variant.ARCH:
            return gpu == self.cc
        if self.kind is Kind.PTX and self.variant is Variant.PLAIN:
            return gpu >= self.cc
        return gpu.major == self.cc.major and gpu.minor >= self.cc.minor

    @classmethod
    def parse(cls, text: str, *, kind: Kind | None = None) -> Target:
        """Accepts sm_90, sm_90a, compute_90, 90, 90a, 100f, 9.0, 9.0a; `kind` overrides the prefix."""
        t = str(text).strip().lower()
        k = Kind.SASS
        if t.startswith("compute_"):
            k = Kind.PTX
        variant = Variant.PLAIN
        body = re.sub(r"^(sm_|compute_|lto_)", "", t)
        if body[-1:] in ("a", "f"):
            variant = Variant(body[-1])
            body = body[:-1]
        try:
            cc = CC.parse(body)
        except BadInputError:
            raise BadInputError(
                f"{text!r} is not a GPU target", hint="write e.g. sm_86, compute_120, 90a, 100f"
            ) from None
        return cls(cc, kind or k, variant)


def _require_sass(t: Target) -> Target:
    if t.kind is not Kind.SASS:
        raise BadInputError(f"extra SASS target {t} is PTX")
    return t


def extra_sass_target(text: str) -> Target:
    """One `extra-sass` entry (sm_86, 90a, 8.6): a SASS target; PTX (compute_90) is refused. The config checks each
    entry with it when read, the plan parses them with it."""
    return _require_sass(Target.parse(text))


def listing_order(t: Target) -> tuple[bool, CC, str]:
    """How targets are listed to people and in plans: SASS before PTX, then by compute capability and variant."""
    return (t.kind is Kind.PTX, t.cc, t.variant.value)


def served_by(gpu: CC, targets: Iterable[Target]) -> tuple[str, Target | None]:
    """How a GPU runs a binary with these targets: ("sass", best cubin) | ("ptx", best PTX) | ("none", None).

    The driver prefers a compatible cubin (the highest one), and JIT-compiles the highest compatible PTX otherwise.
    """
    ts = list(targets)
    sass = [t for t in ts if t.kind is Kind.SASS and t.runs_on(gpu)]
    if sass:
        return "sass", max(sass, key=lambda t: (t.cc, t.variant is not Variant.PLAIN))
    ptx = [t for t in ts if t.kind is Kind.PTX and t.runs_on(gpu)]
    if ptx:
        return "ptx", max(ptx, key=lambda t: t.cc)
    return "none", None


@dataclass(frozen=True)
class Coverage:
    """Which CCs a set of targets serves, and how."""

    native: tuple[CC, ...]
    ptx_only: tuple[CC, ...]
    none: tuple[CC, ...]

    @classmethod
    def of(cls, targets: Iterable[Target], ccs: Iterable[CC] = KNOWN_CCS) -> Coverage:
        ts = list(targets)
        out: dict[str, list[CC]] = {"sass": [], "ptx": [], "none": []}
        for cc in ccs:
            out[served_by(cc, ts)[0]].append(cc)
        return cls(tuple(out["sass"]), tuple(out["ptx"]), tuple(out["none"]))


CCItemKind = Literal["all", "from", "range", "one"]


@dataclass(frozen=True)
class CCRequest:
    """A coverage request, parsed once (`parse_cc_request`): "7.5-12.0" (every supported CC in that range), "7.5+"
    (that CC and up, GPUs newer than any known included: `open_ended`), "8.6" (one CC), "all" (every supported CC), or a comma list of those. Which CCs it names depends
    on what a toolkit supports: `resolve`."""

    text: str  # as the user wrote it, for messages
    items: tuple[tuple[CCItemKind, CC | None, CC | None], ...]

    def __str__(self) -> str:
        return self.text

    @property
    def open_ended(self) -> bool:
        """Whether the request reaches past every GPU known today ("7.5+"): it then asks for GPUs not yet made too,
        which only PTX or runtime compilation can serve (issue 40 item 4)."""
        return any(kind == "from" for kind, _lo, _hi in self.items)

    @classmethod
    def of(cls, ccs: Iterable[CC]) -> CCRequest:
        """The request for exactly these CCs."""
        ordered = sorted(set(ccs))
        return cls(",".join(map(str, ordered)), tuple(("one", cc, None) for cc in ordered))

    def resolve(self, supported: Sequence[CC] = KNOWN_CCS) -> tuple[CC, ...]:
        chosen: set[CC] = set()
        for kind, lo, hi in self.items:
            if kind == "all":
                chosen.update(supported)
            elif kind == "from":
                assert lo is not None
                chosen.update(c for c in supported if c >= lo)
            elif kind == "range":
                assert lo is not None and hi is not None
                chosen.update(c for c in supported if lo <= c <= hi)
            else:
                assert lo is not None
                chosen.add(lo)  # named alone: kept even where `supported` lacks it (the plan says why it is skipped)
        if not chosen:
            raise BadInputError(f"coverage request {self.text!r} names no compute capability this toolkit supports")
        return tuple(sorted(chosen))


def parse_cc_request(spec: str | Sequence[str]) -> CCRequest:
    """The one parser of coverage requests (config, plan, check, slim): syntax and compute capabilities checked here,
    what they name decided by `CCRequest.resolve`."""
    items = spec if not isinstance(spec, str) else [s for s in re.split(r"[,;\s]+", spec) if s]
    text = spec if isinstance(spec, str) else ",".join(spec)
    parsed: list[tuple[CCItemKind, CC | None, CC | None]] = []
    for item in items:
        it = item.strip().lower()
        if it in ("all", "native", "all-supported"):
            parsed.append(("all", None, None))
        elif it.endswith("+"):
            parsed.append(("from", CC.parse(it[:-1]), None))
        elif m := re.fullmatch(r"([0-9.]+)\s*-\s*([0-9.]+)", it, re.ASCII):
            lo, hi = CC.parse(m.group(1)), CC.parse(m.group(2))
            if lo > hi:
                raise BadInputError(f"coverage range {item!r} runs backwards")
            parsed.append(("range", lo, hi))
        else:
            parsed.append(("one", CC.parse(it), None))
    if not parsed:
        raise BadInputError(f"coverage request {text!r} names no compute capability")
    return CCRequest(text.strip(), tuple(parsed))


def parse_cc_set(spec: str | Sequence[str] | CCRequest, *, supported: Sequence[CC] = KNOWN_CCS) -> tuple[CC, ...]:
    """A coverage request -> the set of CCs it names among `supported`."""
    return (spec if isinstance(spec, CCRequest) else parse_cc_request(spec)).resolve(supported)


# PTX to embed: "newest" (of the highest SASS target), "none", or the CCs named.
PtxRequest = Literal["newest", "none"] | CCRequest


def parse_ptx(spec: str | PtxRequest) -> PtxRequest:
    if isinstance(spec, CCRequest):
        return spec
    s = spec.strip().lower()
    if s == "newest":
        return "newest"
    if s in ("none", ""):
        return "none"
    return parse_cc_request(spec)


# Compute capabilities a check requires: "" (not set), "none", "auto" (from the oldest CC the wheel has code for),
# "toolkit" (every CC of the wheel's CUDA major), or the CCs named.
RequireArch = Literal["", "none", "auto", "toolkit"] | CCRequest


def parse_require_arch(spec: str | RequireArch) -> RequireArch:
    if isinstance(spec, CCRequest):
        return spec
    s = spec.strip().lower()
    if s in ("", "none", "auto", "toolkit"):
        return s  # type: ignore[return-value]  # one of the Literal's values, checked just above
    return parse_cc_request(spec)


@dataclass(frozen=True)
class PlanStep:
    """One line of the plan's explanation."""

    target: Target
    serves: tuple[CC, ...]
    why: str


@dataclass(frozen=True)
class ArchPlan:
    """The targets to compile, and why each one is there."""

    targets: tuple[Target, ...]
    wanted: tuple[CC, ...]
    steps: tuple[PlanStep, ...] = field(default=())
    skipped: tuple[tuple[CC, str], ...] = field(default=())
    exclude_integrated: bool = False  # the coverage line then leaves integrated GPUs out, as the plan did

    @property
    def sass(self) -> tuple[Target, ...]:
        return tuple(t for t in self.targets if t.kind is Kind.SASS)

    @property
    def ptx(self) -> tuple[Target, ...]:
        return tuple(t for t in self.targets if t.kind is Kind.PTX)

    @property
    def cmake_architectures(self) -> str:
        """For CMAKE_CUDA_ARCHITECTURES: SASS as N-real; the PTX target as plain N when SASS N exists too."""
        sass = {t.arch for t in self.sass}
        parts = [t.cmake for t in self.sass if t.arch not in {p.arch for p in self.ptx}]
        for p in self.ptx:
            parts.append(p.arch if p.arch in sass else p.cmake)
        return ";".join(parts)

    @property
    def nvcc_gencode(self) -> tuple[str, ...]:
        flags = []
        for t in self.targets:
            code = f"sm_{t.arch}" if t.kind is Kind.SASS else f"compute_{t.arch}"
            flags.append(f"-gencode=arch=compute_{t.arch},code={code}")
        return tuple(flags)

    @property
    def coverage(self) -> Coverage:
        ccs = [cc for cc in KNOWN_CCS if counted(cc, exclude_integrated=self.exclude_integrated)]
        return Coverage.of(self.targets, ccs)


def plan(
    wanted: Iterable[CC],
    *,
    supported: Sequence[CC],
    extra_sass: Iterable[Target] = (),
    ptx: PtxRequest = "newest",
    exclude_integrated: bool = True,
) -> ArchPlan:
    """The fewest SASS targets that serve every wanted CC natively, plus PTX.

    Within one major, SASS for the lowest wanted minor serves every higher minor (binary compatibility), so one cubin
    per major is enough; this is the minimum, since no cubin crosses a major. `extra_sass` adds tuned cubins (e.g. 8.6
    next to 8.0, or 90a); `ptx` is "newest" (PTX of the highest SASS target, which the driver JIT-compiles for GPUs newer
    than any cubin), "none", or the CCs of a request (`parse_ptx`, run where the setting is read).
    """
    supported_set = set(supported)
    skipped: list[tuple[CC, str]] = []
    want: list[CC] = []
    for cc in sorted(set(wanted)):
        gen = generation(cc)
        if cc not in supported_set:
            skipped.append((cc, "the toolkit cannot target it"))
        elif gen is None:
            # the next lower cubin of the major serves it anyway, if such a GPU ever ships
            skipped.append((cc, "no GPU with this compute capability is known"))
        elif not counted(cc, exclude_integrated=exclude_integrated):
            skipped.append((cc, f"{gen.name} is an integrated aarch64 GPU; an x86_64 wheel never runs there"))
        else:
            want.append(cc)
    if not want:
        why = "; ".join(f"{cc}: {reason}" for cc, reason in skipped)
        raise BadInputError(
            "the coverage request leaves no compute capability to build for" + (f" ({why})" if why else ""),
            hint="supported by this toolkit: " + ", ".join(str(c) for c in sorted(supported_set)),
        )
    steps: list[PlanStep] = []
    targets: list[Target] = []
    majors = sorted({c.major for c in want})
    for major in majors:
        in_major = [c for c in want if c.major == major]
        t = Target(in_major[0], Kind.SASS)
        targets.append(t)
        others = tuple(c for c in in_major if c != t.cc)
        why = f"lowest wanted {major}.x" + (f"; binary-compatible with {', '.join(map(str, others))}" if others else "")
        steps.append(PlanStep(t, tuple(in_major), why))
    for extra in extra_sass:
        _require_sass(extra)
        if extra.cc not in supported_set:
            raise BadInputError(
                f"extra SASS target {extra} is beyond this toolkit",
                hint="supported: " + ", ".join(str(c) for c in sorted(supported_set)),
            )
        if extra not in targets:
            targets.append(extra)
            served = tuple(c for c in want if extra.runs_on(c))
            steps.append(PlanStep(extra, served, "requested: code tuned for this CC"))
    if ptx == "newest":
        top = max((t for t in targets if t.variant is Variant.PLAIN), key=lambda t: t.cc)
        p = Target(top.cc, Kind.PTX)
        targets.append(p)
        steps.append(PlanStep(p, (), f"PTX of the newest target, JIT-compiled by drivers on GPUs newer than {top.cc}"))
    elif ptx != "none":
        for cc in ptx.resolve(supported):
            if cc not in supported_set:
                raise BadInputError(
                    f"PTX target compute_{cc.sm} is beyond this toolkit",
                    hint="supported: " + ", ".join(str(c) for c in sorted(supported_set)),
                )
            p = Target(cc, Kind.PTX)
            if p not in targets:
                targets.append(p)
                steps.append(PlanStep(p, (), "requested PTX"))
    targets.sort(key=listing_order)
    return ArchPlan(tuple(targets), tuple(want), tuple(steps), tuple(skipped), exclude_integrated=exclude_integrated)


def parse_targets(spec: str | Sequence[str]) -> tuple[Target, ...]:
    """An explicit target list: "75-real;80-real;90" (CMake style), "sm_80,compute_90", "80 90a"."""
    items = spec if not isinstance(spec, str) else [s for s in re.split(r"[,;\s]+", spec) if s]
    out: list[Target] = []
    for item in items:
        it = item.strip().lower()
        if it.endswith("-real"):
            out.append(Target.parse(it[:-5], kind=Kind.SASS))
        elif it.endswith("-virtual"):
            out.append(Target.parse(it[:-8], kind=Kind.PTX))
        elif it.startswith(("sm_", "compute_")):
            out.append(Target.parse(it))
        else:  # CMake: a bare number means SASS and PTX
            t = Target.parse(it, kind=Kind.SASS)
            out.extend([t, Target(t.cc, Kind.PTX, t.variant)])
    return tuple(dict.fromkeys(out))


def explicit_plan(
    spec: str | Sequence[str] | tuple[Target, ...], *, supported: Sequence[CC], exclude_integrated: bool = False
) -> ArchPlan:
    """The plan of an explicit target list (`parse_targets`' forms, or targets already parsed)."""
    given: list[str | Target] = [spec] if isinstance(spec, str) else list(spec)
    targets: tuple[Target, ...] = tuple(
        dict.fromkeys(t for item in given for t in ((item,) if isinstance(item, Target) else parse_targets(item)))
    )
    beyond = [t for t in targets if t.cc not in set(supported)]
    if beyond:
        raise BadInputError(
            "targets beyond this toolkit: " + ", ".join(map(str, beyond)),
            hint="supported: " + ", ".join(str(c) for c in sorted(set(supported))),
        )
    steps = tuple(PlanStep(t, (), "listed explicitly") for t in targets)
    wanted = tuple(
        sorted(
            {
                c
                for c in KNOWN_CCS
                for t in targets
                if t.runs_on(c) and counted(c, exclude_integrated=exclude_integrated)
            }
        )
    )
    return ArchPlan(
        tuple(sorted(targets, key=lambda t: (t.kind is Kind.PTX, t.cc))),
        wanted,
        steps,
        exclude_integrated=exclude_integrated,
    )
