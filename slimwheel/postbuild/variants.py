"""`slimwheel variants`: one wheel per GPU family of a wheel's SASS, labelled as PEP 825 (draft) wheel variants.

Format (PEP 825 draft, format version 0.1.0, checked 2026-12): the variant label is an extra last component of the
filename (`{name}-{version}-{python}-{abi}-{platform}-{label}.whl`, label `^[0-9a-z_.]+$`); the wheel holds
`*.dist-info/variant.json` mapping that label to its properties (`{namespace: {feature: [values]}}`, values sorted);
the index serves `{name}-{version}-variants.json` listing every label of the version. Properties come from the
`nvidia` namespace as the NVIDIA variant provider (wheelnext/nvidia-variant-provider) reads them: `sm_arch` values
in CMake spelling, `90_real` for a cubin, `90_virtual` for PTX. The provider offers a GPU of compute capability X.Y
the values X{Y..0}_real and X0_virtual, and a wheel is compatible when one of its sm_arch values is offered.

Families follow binary compatibility (cuda/arch.py): a cubin runs only within its major, so one variant per major
the wheel has SASS for; each keeps, per CUDA module, what serves that major's GPUs (served_by); the newest family also
keeps the newest PTX, so that the wheel still runs, through JIT, on GPUs newer than its newest cubin. Variant
wheels keep the version (variants of one release differ by label); the unchanged wheel is copied beside them as the
universal fallback that installers without variant support, and GPUs no variant matches, get.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slimwheel import check as checkmod
from slimwheel import fsutil
from slimwheel.config import DEFAULT_BUDGET
from slimwheel.cuda.arch import CCRequest, Kind, Target, listing_order
from slimwheel.errors import BadInputError
from slimwheel.inspect.pyimports import PythonImports
from slimwheel.inspect.report import WheelReport
from slimwheel.postbuild.fatbin_edit import SlimRequest
from slimwheel.postbuild.slim import (
    Rewritten,
    WheelSummary,
    files_json,
    judge_output,
    output_name,
    plans_for,
    sizes_json,
    unpack_input,
    write_rewritten,
)

SCHEMA = 1
VARIANT_SCHEMA_URL = "https://variants-schema.wheelnext.dev/peps/825/v0.1.0.json"
NAMESPACE = "nvidia"
FEATURE = "sm_arch"


@dataclass(frozen=True, kw_only=True)
class Family:
    """One variant to make: the GPUs of one major the universal wheel serves, and what to keep for them."""

    major: int
    label: str
    request: SlimRequest


@dataclass(frozen=True, kw_only=True)
class VariantWheel:
    family: Family
    rewritten: Rewritten
    report: WheelSummary  # the report itself is judged and dropped: a run of many variants holds one at a time
    properties: dict[str, dict[str, list[str]]]
    verdict: checkmod.Verdict


@dataclass(frozen=True, kw_only=True)
class VariantsResult:
    source: Path
    universal: Path  # the unchanged copy in the output folder
    index_file: Path  # {name}-{version}-variants.json
    before: WheelReport
    variants: tuple[VariantWheel, ...]


def families(report: WheelReport) -> tuple[Family, ...]:
    """One family per major with SASS in the wheel: the GPUs of that major the wheel serves at all."""
    served = set(report.coverage.native) | set(report.coverage.ptx_only)
    majors = sorted({t.cc.major for t in report.targets if t.kind is Kind.SASS})
    if not majors:
        raise BadInputError(f"{report.path}: no SASS (cubin) in the wheel: there is no GPU family to split by")
    out = []
    for major in majors:
        # required_ccs is where a CC range becomes GPUs to serve (integrated aarch64 GPUs out for x86_64 wheels).
        ccs, _left_out = checkmod.required_ccs(f"{major}.0-{major}.9", report)
        ccs = tuple(cc for cc in ccs if cc in served)
        if not ccs:
            continue
        out.append(
            Family(
                major=major,
                label=f"sm{major}x",
                request=SlimRequest(ccs=ccs, ptx="newest" if major == majors[-1] else "needed"),
            )
        )
    return tuple(out)


def sm_arch_values(targets: tuple[Target, ...]) -> list[str]:
    """The provider's spelling of a wheel's targets: 90_real, 120_virtual; `a`/`f` targets keep their suffix
    (90a_real), which the provider offers no GPU today, so they never make a wheel look compatible by themselves."""
    values = {f"{t.arch}_{'real' if t.kind is Kind.SASS else 'virtual'}" for t in targets}
    return sorted(values)


def variant_json(label: str, properties: dict[str, dict[str, list[str]]]) -> dict[str, Any]:
    return {
        "$schema": VARIANT_SCHEMA_URL,
        "default-priorities": {"namespace": [NAMESPACE]},
        "variants": {label: properties},
    }


def make_variants(
    wheel: Path,
    out_dir: Path,
    *,
    budget: str | int = DEFAULT_BUDGET,
    rewrite_record: bool = False,
    read_index: bool = False,
) -> VariantsResult:
    """Every family's variant wheel, the universal copy and the index file, from one read of `wheel` (unpacked once;
    each variant streamed from the unpacked files through its own plans). All wheels are written under temporary
    names, read back and judged, and renamed together only when every one of them was made."""
    wheel = Path(wheel)
    out_dir = Path(out_dir)
    made: list[VariantWheel] = []
    with fsutil.work_dir("slimwheel-slim-") as work:
        src = unpack_input(wheel, work, rewrite_record=rewrite_record)
        before = src.report
        fams = families(before)
        # The wheels' Python sources are the input's (slimming edits libraries only): read once, if the rules ask.
        python = PythonImports.from_wheel(wheel)
        # So are its requirements and tags: what they install is walked once, on first need, for all its wheels.
        graph = checkmod.requirement_graph(before) if read_index else None
        targets = [output_name(src, out_dir, version=None, variant=fam.label) for fam in fams]
        universal = out_dir / wheel.name
        same = universal.resolve() == wheel.resolve()
        with fsutil.atomic_paths([*targets, *([] if same else [universal])]) as tmps:
            for fam, target, tmp in zip(fams, targets, tmps, strict=False):
                # variant.json goes into the wheel as it is written, so the properties come from the plans
                # beforehand; the written wheel's report must then show exactly those targets.
                plans = plans_for(src, fam.request)
                kept = tuple(sorted(frozenset().union(*(p.kept_targets for p in plans.values())), key=listing_order))
                props = {NAMESPACE: {FEATURE: sm_arch_values(kept)}}
                body = (json.dumps(variant_json(fam.label, props), indent=2, sort_keys=False) + "\n").encode()
                rewritten = write_rewritten(src, tmp, target, plans, version=None, extra_files=_variant_file(body))
                report = judge_output(tmp, target)
                if set(report.targets) != set(kept):
                    raise AssertionError(f"{target.name}: targets {report.targets} differ from the plan {kept}")
                policy = checkmod.make_policy(
                    report, budget=budget, require_arch=CCRequest.of(fam.request.ccs), read_index=read_index
                )
                analysis = checkmod.analyze(report.path, report=report, file=tmp, imports=python, graph=graph)
                verdict = checkmod.judge(analysis, policy)
                made.append(
                    VariantWheel(
                        family=fam,
                        rewritten=rewritten,
                        report=WheelSummary.of(report),
                        properties=props,
                        verdict=verdict,
                    )
                )
                del report, policy, verdict, analysis
            if not same:
                shutil.copyfile(wheel, tmps[-1])
    dist = before.path.name.split("-", 1)[0]
    index = {
        "$schema": VARIANT_SCHEMA_URL,
        "default-priorities": {"namespace": [NAMESPACE]},
        "variants": {v.family.label: v.properties for v in made},
    }
    index_file = out_dir / f"{dist}-{before.version}-variants.json"
    fsutil.write_text_atomic(index_file, json.dumps(index, indent=2) + "\n")
    return VariantsResult(source=wheel, universal=universal, index_file=index_file, before=before, variants=tuple(made))


def _variant_file(body: bytes) -> Callable[[str], Mapping[str, bytes]]:
    def files(dist_info: str) -> Mapping[str, bytes]:
        return {f"{dist_info}/variant.json": body}

    return files


def result_to_json(r: VariantsResult) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "input": str(r.source),
        "universal": {
            "wheel": str(r.universal),
            "bytes": r.before.size,
            "installed_bytes": r.before.installed_size,
            "targets": [str(t) for t in r.before.targets],
        },
        "index_file": str(r.index_file),
        "variants": [
            {
                "label": v.family.label,
                "wheel": str(v.rewritten.wheel),
                "gpus": [str(cc) for cc in v.family.request.ccs],
                "ptx": v.family.request.ptx,
                "properties": v.properties,
                "targets": [str(t) for t in v.report.targets],
                "sizes": sizes_json(WheelSummary.of(r.before), v.report),
                "files": files_json(v.rewritten.files),
                "check": checkmod.verdict_to_json(v.verdict),
            }
            for v in r.variants
        ],
    }
