"""`slimwheel variants`: one wheel per GPU family of a wheel's SASS, labelled as wheel variants (PEP 825 format,
PEP 850 schema 0.2.0) that uv's `--preview-features wheel-variants` installs by the GPU it finds.

Format (checked against uv 0.13.8, 2026-12): the variant label is an extra last component of the filename
(`{name}-{version}-{python}-{abi}-{platform}-{label}.whl`, label `^[0-9a-z_.]+$`); the wheel holds
`*.dist-info/variant.json` mapping that label to its properties (`{namespace: {feature: [values]}}`, values sorted)
and declaring the provider of every namespace it names; `{name}-{version}-variants.json` beside the wheels lists every
label of the version. uv reads only the schema URLs it knows (0.1.0 is skipped as "Unknown variant metadata schema")
and refuses metadata whose providers do not match `default-priorities.namespace`.

Properties are in the `nvidia` namespace, as the NVIDIA provider reads them (uv has one built in; others install
`nvidia-variant-provider`): `sm_arch` values in CMake spelling, `90_real` for a cubin, `90_virtual` for PTX; for a
GPU of compute capability X.Y the provider offers X{Y..0}_real and X0_virtual, and a wheel is compatible when one of
its sm_arch values is offered. `cuda_version_lower_bound` (one value, "12.0") is the oldest CUDA version the driver
must report: the provider offers every version up to the driver's, and a variant needs every feature it names.

Families follow binary compatibility (cuda/arch.py): a cubin runs only within its major, so one variant per major
the wheel has SASS for; each keeps, per CUDA module, what serves that major's GPUs (served_by); the newest family also
keeps the newest PTX, so that the wheel still runs, through JIT, on GPUs newer than its newest cubin. Variant
wheels keep the version (variants of one release differ by label); the unchanged wheel is copied beside them as the
universal fallback that installers without variant support, and GPUs no variant matches, get.

Every output (the wheels, the index JSON, the PEP 503 pages under `simple/`) is made fresh (O_EXCL, O_NOFOLLOW) in a
private folder inside the output folder, which is opened once; only when all of them were written and read back are
they renamed into place, through that one handle. Names come from the input's validated file name, never from its
METADATA, which must agree with it.
"""

from __future__ import annotations

import contextlib
import fcntl
import html
import io
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from slimwheel import check as checkmod
from slimwheel import fsutil
from slimwheel.cuda.arch import CC, KNOWN_CCS, CCRequest, Kind, Target, listing_order
from slimwheel.cuda.versions import (
    PTX_ISA_RELEASE,
    RELEASE_DRIVER,
    SIZE_COMPRESSION_DRIVER_CUDA12,
    CudaVersion,
    driver_key,
)
from slimwheel.errors import BadInputError
from slimwheel.inspect.fatbin import FatbinEntry
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
# The newest schema uv 0.13.8 reads (it also reads peps/825/v0.1.1.json); the 0.1.0 URL slimwheel wrote before is
# skipped by uv as unknown, and so were the variants.
VARIANT_SCHEMA_URL = "https://variants-schema.wheelnext.dev/peps/850/v0.2.0.json"
NAMESPACE = "nvidia"
FEATURE = "sm_arch"
CUDA_FEATURE = "cuda_version_lower_bound"
# The provider of the namespace, as its plugin is published: installers that run plugins install `requires` and call
# `plugin-api`; uv recognises it and uses its built-in copy. Without a declaration uv refuses the metadata.
PROVIDER = {
    "requires": ["nvidia-variant-provider>=0.0.1,<1.0.0"],
    "plugin-api": "nvidia_variant_provider.plugin:NvidiaVariantPlugin",
}
SIMPLE = "simple"  # the PEP 503 folder inside the output folder

Properties = dict[str, dict[str, list[str]]]


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
    properties: Properties
    verdict: checkmod.Verdict


@dataclass(frozen=True, kw_only=True)
class VariantsResult:
    source: Path
    universal: Path  # the unchanged copy in the output folder
    index_file: Path  # {name}-{version}-variants.json
    simple: Path  # the PEP 503 project page, simple/{project}/index.html
    before: WheelReport
    variants: tuple[VariantWheel, ...]


@dataclass(frozen=True, kw_only=True)
class Release:
    """Project and version as the wheel's file name spells them, validated: what names the index files."""

    project: str  # PEP 503 normalized: nvidia-curand-cu12
    version: str  # normalized: 10.3.10.19

    @property
    def stem(self) -> str:
        """`{name}-{version}` normalized as in wheel file names (PEP 825 names the index JSON so)."""
        return f"{self.project.replace('-', '_')}-{self.version}"


def release_of(wheel: Path, report: WheelReport) -> Release:
    """The project and version of `wheel` from its file name (packaging's parser: a name and a PEP 440 version, never
    a path), refused when METADATA says otherwise: a Version such as `../../x` or one with a NUL named the index file
    once, outside the output folder."""
    try:
        name, version, _build, _tags = parse_wheel_filename(wheel.name)
    except (InvalidWheelFilename, InvalidVersion) as e:
        raise BadInputError(f"{wheel}: not a wheel file name: {e}") from None
    try:
        meta_version = Version(report.version)
    except InvalidVersion:
        raise BadInputError(
            f"{wheel}: METADATA's Version {report.version!r} is not a PEP 440 version", hint="rebuild the wheel"
        ) from None
    if canonicalize_name(report.name) != name or meta_version != version:
        raise BadInputError(
            f"{wheel}: METADATA says {report.name!r} {report.version!r}, the file name {str(name)!r} {str(version)!r}",
            hint="installers take the file name; rebuild the wheel so that both agree",
        )
    return Release(project=str(name), version=str(version))


def families(report: WheelReport) -> tuple[Family, ...]:
    """One family per major with SASS in the wheel: the GPUs of that major the wheel serves at all."""
    served = set(report.coverage.native) | set(report.coverage.ptx_only)
    majors = sorted({t.cc.major for t in report.targets if t.kind is Kind.SASS})
    if not majors:
        raise BadInputError(f"{report.path}: no SASS (cubin) in the wheel: there is no GPU family to split by")
    out = []
    for major in majors:
        if not any(cc.major == major for cc in KNOWN_CCS):
            # Kepler (dgl-cu111 0.6.1 has sm_35 and sm_37): no driver a variant provider runs with has it; those GPUs
            # get the universal wheel, which keeps their code
            continue
        # required_ccs is where a CC range becomes GPUs to serve (integrated aarch64 GPUs out for x86_64 wheels).
        ccs, _left_out = checkmod.required_ccs(
            CCRequest(f"{major}.0-{major}.9", (("range", CC(major, 0), CC(major, 9)),)), report
        )
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


def cuda_lower_bound(cuda_major: int | None, entries: Iterable[FatbinEntry]) -> CudaVersion | None:
    """The oldest CUDA version a driver must support to load `entries` (a variant's device code), by the rules the
    wheel report's driver floor follows: SASS of a major loads on the major's first driver (minor version
    compatibility); zstd-compressed entries of CUDA 12 need the release whose driver reads them; PTX is JIT-compiled
    only by a driver of the release that made its ISA. None when the wheel's CUDA major is not known."""
    if cuda_major is None:
        return None
    bound = (cuda_major, 0)
    zstd = [k for k, drv in RELEASE_DRIVER.items() if driver_key(drv) >= driver_key(SIZE_COMPRESSION_DRIVER_CUDA12)]
    for e in entries:
        if cuda_major == 12 and e.compression == "zstd":
            bound = max(bound, min(zstd))
        if e.kind == "ptx" and e.ptx_isa is not None:
            # An ISA newer than the table: the newest release known below it is a lower bound (as the report does).
            rel = PTX_ISA_RELEASE.get(e.ptx_isa) or max(
                (r for isa, r in PTX_ISA_RELEASE.items() if isa <= e.ptx_isa), default=None
            )
            if rel is not None:
                bound = max(bound, rel)
    return CudaVersion(*bound)


def variant_properties(kept: tuple[Target, ...], cuda: CudaVersion | None) -> Properties:
    features = {FEATURE: sm_arch_values(kept)}
    if cuda is not None:
        features[CUDA_FEATURE] = [str(cuda)]
    return {NAMESPACE: dict(sorted(features.items()))}


def variant_json(variants: Mapping[str, Properties]) -> dict[str, Any]:
    """variant.json of one wheel (one label) or the index's {name}-{version}-variants.json (every label)."""
    return {
        "$schema": VARIANT_SCHEMA_URL,
        "default-priorities": {"namespace": [NAMESPACE]},
        "providers": {NAMESPACE: PROVIDER},
        "variants": dict(variants),
    }


def _dumps(doc: Mapping[str, Any]) -> bytes:
    return (json.dumps(doc, indent=2) + "\n").encode()


def simple_pages(release: Release, files: Iterable[tuple[str, str]]) -> dict[str, bytes]:
    """The static PEP 503 index of the output folder: `simple/index.html` and `simple/{project}/index.html` linking
    `files` (name, sha256 hex; the wheels and the variants JSON, two folders up) by relative URL, so that the folder
    serves as it is (`--index-url file:///.../simple`, or any static web server)."""
    proj = html.escape(release.project)
    links = "".join(
        f'<a href="../../{html.escape(name)}#sha256={digest}">{html.escape(name)}</a><br>\n' for name, digest in files
    )
    head = '<!DOCTYPE html>\n<html><head><meta name="pypi:repository-version" content="1.0"></head><body>\n'
    return {
        f"{SIMPLE}/index.html": f'{head}<a href="{proj}/">{proj}</a>\n</body></html>\n'.encode(),
        f"{SIMPLE}/{release.project}/index.html": f"{head}{links}</body></html>\n".encode(),
    }


def make_variants(
    wheel: Path,
    out_dir: Path,
    *,
    rewrite_record: bool = False,
    settings: checkmod.PolicySettings = checkmod.NO_SETTINGS,
) -> VariantsResult:
    """Every family's variant wheel, the universal copy, the index JSON and the PEP 503 pages, from one read of
    `wheel` (unpacked once; each variant streamed from the unpacked files through its own plans). Everything is
    written fresh into a private folder of `out_dir`, the wheels read back and judged, and renamed into place
    together only when all of it was made (`_Staging`)."""
    wheel = Path(wheel)
    out_dir = Path(out_dir)
    made: list[VariantWheel] = []
    with fsutil.work_dir("slimwheel-slim-") as work:
        src = unpack_input(wheel, work, rewrite_record=rewrite_record)
        before = src.report
        release = release_of(wheel, before)
        fams = families(before)
        # The wheels' Python sources are the input's (slimming edits libraries only): read once, if the rules ask.
        python = PythonImports.from_wheel(wheel)
        # So are its requirements and tags: what they install is walked once, on first need, for all its wheels.
        graph = checkmod.requirement_graph(before) if settings.read_index else None
        targets = [output_name(src, out_dir, version=None, variant=fam.label) for fam in fams]
        universal = out_dir / wheel.name
        index_name = f"{release.stem}-variants.json"
        page_names = list(simple_pages(release, []))
        with _Staging(out_dir, [t.name for t in targets] + [wheel.name, index_name, *page_names]) as stage:
            for fam, target in zip(fams, targets, strict=True):
                # variant.json goes into the wheel as it is written, so the properties come from the plans
                # beforehand; the written wheel's report must then show exactly those targets and that bound.
                plans = plans_for(src, fam.request)
                kept = tuple(sorted(frozenset().union(*(p.kept_targets for p in plans.values())), key=listing_order))
                cuda = cuda_lower_bound(before.cuda_major, (e for e in before.code_entries if e.target in kept))
                props = variant_properties(kept, cuda)
                body = _dumps(variant_json({fam.label: props}))
                tmp = stage.create(target.name)
                rewritten = write_rewritten(src, tmp, target, plans, version=None, extra_files=_variant_file(body))
                report = judge_output(tmp, target)
                if set(report.targets) != set(kept):
                    raise AssertionError(f"{target.name}: targets {report.targets} differ from the plan {kept}")
                # the universal wheel's CUDA major: a variant without PTX may no longer show it (curand's came from
                # its PTX ISA)
                if cuda_lower_bound(before.cuda_major, report.code_entries) != cuda:
                    raise AssertionError(f"{target.name}: its CUDA lower bound differs from the plan's {cuda}")
                policy = checkmod.policy_for(
                    report, settings, require_arch=CCRequest.of(fam.request.ccs), made_for=fam.request.ccs
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
            with open(wheel, "rb") as fin, stage.open(wheel.name) as fout:
                shutil.copyfileobj(fin, fout, 1 << 20)
            with stage.open(index_name) as fh:
                fh.write(_dumps(variant_json({v.family.label: v.properties for v in made})))
            listed = [*(t.name for t in targets), wheel.name, index_name]
            for name, page in simple_pages(release, ((n, fsutil.sha256_file(stage.path(n))) for n in listed)).items():
                with stage.open(name) as fh:
                    fh.write(page)
    return VariantsResult(
        source=wheel,
        universal=universal,
        index_file=out_dir / index_name,
        simple=out_dir / SIMPLE / release.project / "index.html",
        before=before,
        variants=tuple(made),
    )


def _variant_file(body: bytes) -> Callable[[str], Mapping[str, bytes]]:
    def files(dist_info: str) -> Mapping[str, bytes]:
        return {f"{dist_info}/variant.json": body}

    return files


class _Staging:
    """The outputs of one run, by path relative to `out_dir` (`simple/pkg/index.html`): the output folder is opened
    once and everything after goes through that handle; each output is created fresh (O_EXCL | O_NOFOLLOW) in a
    private folder made there (`.{first}.XXXXXXXX.tmp`, mode 0700, flocked while the run lives, so that the next run
    removes it if this one is killed: `fsutil.remove_stale_temps`); on success every output is renamed onto its
    name, so that a link or FIFO planted under an output's name is replaced, never written through or opened. What
    already stands under an output's name and is neither a file nor a link (a folder, a device, a FIFO), or a link
    or file where a folder goes (`simple/`), is refused before anything is written, and again before any rename."""

    def __init__(self, out_dir: Path, names: list[str]) -> None:
        self.out_dir = out_dir
        self.names = names
        self._slot = {name: f"{i}.out" for i, name in enumerate(names)}  # flat names in the private folder
        self._stack = contextlib.ExitStack()
        self._dir = -1
        self._stage = -1
        self._stage_name = ""

    def __enter__(self) -> _Staging:
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            self._dir = os.open(self.out_dir, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as e:  # an output folder the user named that cannot be used: bad input, not a crash
            raise BadInputError(f"{self.out_dir}: cannot write here: {e.strerror or e}") from None
        self._stack.callback(os.close, self._dir)
        try:
            self._judge_all()
            first = self.names[0]
            fsutil.remove_stale_temps(self.out_dir / first)
            # /proc/self/fd/N is the folder opened above, whatever its path names meanwhile
            made = tempfile.mkdtemp(prefix=f".{first}.", suffix=".tmp", dir=f"/proc/self/fd/{self._dir}")
            self._stage_name = Path(made).name
            self._stage = os.open(self._stage_name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=self._dir)
            self._stack.callback(os.close, self._stage)
            self._stack.callback(shutil.rmtree, self._stage_path(), ignore_errors=True)
            fcntl.flock(self._stage, fcntl.LOCK_EX)
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        try:
            if kind is None:
                self._commit()
        finally:
            self._stack.close()

    def _judge_all(self) -> None:
        for name in self.names:
            *folders, _leaf = name.split("/")
            for i in range(len(folders)):
                mode = self._lstat_mode("/".join(folders[: i + 1]))
                if mode is not None and not stat.S_ISDIR(mode):
                    raise BadInputError(
                        f"{self.out_dir / '/'.join(folders[: i + 1])}: is a link or a file where the index folder "
                        "goes; nothing is written through it",
                        hint="remove it or choose another output folder",
                    )
            mode = self._lstat_mode(name)
            if mode is not None and not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
                raise BadInputError(
                    f"{self.out_dir / name}: stands in the output folder and is not a file; it is never replaced",
                    hint="remove it or choose another output folder",
                )

    def _lstat_mode(self, name: str) -> int | None:
        try:
            return os.lstat(name, dir_fd=self._dir).st_mode
        except FileNotFoundError:
            return None

    def _stage_path(self) -> Path:
        return Path(f"/proc/self/fd/{self._dir}/{self._stage_name}")

    def path(self, name: str) -> Path:
        """Where output `name` is written, reached through the folder handle (/proc/self/fd), never the -o path."""
        return self._stage_path() / self._slot[name]

    def open(self, name: str) -> io.BufferedWriter:
        """Output `name`, created fresh for writing."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        return os.fdopen(os.open(self._slot[name], flags, 0o600, dir_fd=self._stage), "wb")

    def create(self, name: str) -> Path:
        """Output `name` created fresh and empty, for writers that take a path (the zip writer opens it again)."""
        self.open(name).close()
        return self.path(name)

    def _folder(self, parts: list[str]) -> int:
        """The folder `parts` under the output folder, made if missing, opened without following links."""
        fd = os.dup(self._dir)
        try:
            for part in parts:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
                nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                os.close(fd)
                fd = nxt
        except OSError:
            os.close(fd)
            raise
        return fd

    def _commit(self) -> None:
        umask = os.umask(0)
        os.umask(umask)
        for name in self.names:
            # raises FileNotFoundError for an output never written: a bug here, not bad input
            os.chmod(self._slot[name], 0o666 & ~umask, dir_fd=self._stage)
        # what was planted while the run lasted (a FIFO under an output's name) is refused before any rename
        self._judge_all()
        for name in self.names:
            *folders, leaf = name.split("/")
            dst = self._folder(folders)
            try:
                os.replace(self._slot[name], leaf, src_dir_fd=self._stage, dst_dir_fd=dst)
            finally:
                os.close(dst)


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
        "simple_index": str(r.simple),
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
