"""`slimwheel repair`: auditwheel repair that leaves the CUDA libraries to PyPI's nvidia-* wheels and requires them,
and any other library a PyPI wheel provides (`--external`) likewise."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from slimwheel import config as cfgmod
from slimwheel import heap, shown, torchext
from slimwheel.analysis import index_lookup
from slimwheel.cli import quiet
from slimwheel.commands._options import CUDA_VERSION, format_option, offline_option, read_index
from slimwheel.cuda.versions import CudaVersion
from slimwheel.errors import ExitCode
from slimwheel.external import parse_externals
from slimwheel.repair import repair_wheel
from slimwheel.units import mib


@click.command("repair")
@click.argument("wheel", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--out-dir",
    "-w",
    "--wheel-dir",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("wheelhouse"),
    show_default=True,
    help="Folder for the repaired wheel (-o/--out-dir as build, slim and variants name it; -w/--wheel-dir as "
    "auditwheel does).",
)
@click.option(
    "--cuda",
    "cuda",
    type=CUDA_VERSION,
    metavar="TEXT",
    default=None,
    help="CUDA release the wheel was built with (e.g. 13.0); default: "
    "the major its DT_NEEDED libraries name, lower bounds X.0.",
)
@click.option("--plat", default=None, help="Platform tag, e.g. manylinux_2_28_x86_64 (default: auditwheel's auto).")
@click.option("--no-loader", is_flag=True, help="Do not add slimwheel's run-time loader (rely on RPATH alone).")
@click.option(
    "--external",
    "externals",
    multiple=True,
    metavar="SPEC",
    help="SONAME=REQUIREMENT[@FOLDER]: a library another PyPI wheel provides; not bundled, but required and found "
    "through RPATH (e.g. 'libscipy_openblas.so=scipy-openblas32>=0.3.28'). FOLDER: where that wheel installs it, "
    "relative to site-packages; default: looked up in the installed distribution. SONAME may be a glob. Repeatable.",
)
@click.option(
    "--torch",
    "torch_version",
    default=None,
    metavar="VERSION",
    help="The torch a PyTorch extension was built against (2.11.0+cu130; the local part names its CUDA); "
    "default: the one release the wheel pins itself to (torch==2.11.0) where PyPI's build of it has the wheel's "
    "CUDA major, else the torch installed in this Python.",
)
@click.option(
    "--rewrite-record",
    is_flag=True,
    help="Accept an input whose RECORD does not match its files (refused "
    "by default: such a wheel was changed after it was built); the output gets a correct RECORD.",
)
@click.option(
    "--unvendor/--keep-vendored",
    default=True,
    show_default=True,
    help="Copies of CUDA libraries the wheel carries (auditwheel's libcudart-<hash>.so.12 under <name>.libs/, "
    "or unrenamed): replace them with the nvidia-* wheels (required, found by RPATH and the loader), or "
    f"refuse the wheel (exit {ExitCode.INCONSISTENT_DEPENDENCIES:d}).",
)
@click.option(
    "--split-shared-copies",
    "split_shared",
    is_flag=True,
    help="Unvendor a copy even when a requirement's wheel ships the same one (spconv-cu126 and cumm-cu126 both "
    "carry libcudart-53d54daa.so.12.6.68): the process then maps that copy and the nvidia-* wheel's. Refused "
    "by default (exit 12).",
)
@offline_option(
    "Do not read the package index for what the requirements' wheels, and theirs, install (a library they install "
    "is then not left to them but bundled, or refused where auditwheel finds none; the copies they share with this "
    "wheel are unknown, and the result says so). Env: SLIMWHEEL_OFFLINE=1."
)
@click.option(
    "--sysroot",
    "sysroot",
    default=None,
    metavar="NAME",
    help="The sysroot the wheel was built with (`slimwheel sysroot`, e.g. debian11): libraries are bundled from its "
    "folders first, the copies the wheel was linked against (the host's may need a newer glibc).",
)
@click.option(
    "--library-dir",
    "named_dirs",
    multiple=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    metavar="FOLDER",
    help="A folder outside the wheel whose libraries may be bundled: searched for what auditwheel bundles, and an "
    "RPATH entry into it is followed. Entries into other folders outside the wheel (/tmp/x) are dropped first, and a "
    f"library found only through one is refused (exit {ExitCode.INCONSISTENT_DEPENDENCIES:d}). Repeatable.",
)
@click.option(
    "--strip/--no-strip",
    default=None,
    help="Strip the ELF files that check fails for debug info (.debug_* sections, a symbol table over 1 MiB) with "
    "`strip --strip-unneeded`, before auditwheel. Config key: strip; env: SLIMWHEEL_STRIP.",
)
@format_option(
    ["text", "json"],
    "text",
    help="How to print the result.",
)
@click.option("--json", "as_json", is_flag=True, hidden=True, help="The same as --format json (kept for scripts).")
def command(
    wheel: Path,
    out_dir: Path,
    cuda: CudaVersion | None,
    plat: str | None,
    no_loader: bool,
    externals: tuple[str, ...],
    rewrite_record: bool,
    unvendor: bool,
    split_shared: bool,
    offline: bool | None,
    torch_version: str | None,
    sysroot: str | None,
    named_dirs: tuple[Path, ...],
    strip: bool | None,
    fmt: str,
    as_json: bool,
) -> None:
    """Repair WHEEL: bundle what auditwheel bundles, except the CUDA libraries of the nvidia-* wheels and the
    --external libraries, which become Requires-Dist entries. Usable as cibuildwheel's repair command:
    `slimwheel repair -w {dest_dir} {wheel}`."""
    heap.return_freed_buffers()
    # CLI > SLIMWHEEL_* > [tool.slimwheel] of the current folder's pyproject.toml > default, as check reads its policy
    cfg = cfgmod.load(Path.cwd(), dict(os.environ), {"strip": strip})
    library_dirs = [d.absolute() for d in named_dirs]
    if sysroot:
        from slimwheel.toolkit.sysroot import ensure_sysroot

        library_dirs += ensure_sysroot(sysroot).library_path()
    result = repair_wheel(
        wheel,
        out_dir,
        cuda=cuda,
        loader=not no_loader,
        plat=plat,
        externals=parse_externals(externals, where="--external"),
        rewrite_record=rewrite_record,
        unvendor=unvendor,
        torch=torchext.parse_torch_option(torch_version) if torch_version else None,
        library_dirs=library_dirs,
        index=index_lookup if read_index(offline) else None,
        split_shared=split_shared,
        strip=cfg.strip,
    )
    if as_json or fmt == "json":
        click.echo(
            json.dumps(
                {
                    "schema": 1,
                    "wheel": str(result.wheel),
                    "cuda_major": result.cuda_major,
                    "excluded": list(result.excluded),
                    "requires": list(result.requires),
                    "kept": list(result.kept),
                    "bundled": list(result.bundled),
                    "loader": list(result.loader),
                    "rpath_fixed": list(result.rpath_fixed),
                    "rpath_dropped": list(result.rpath_dropped),
                    "record_rewritten": result.record_rewritten,
                    "extra": result.extra,
                    "optional": list(result.optional),
                    "unvendored": [
                        {
                            "file": u.file,
                            "needed_as": u.replaced_by,
                            "package": u.package,
                            "wheel_bytes": u.compressed,
                            "installed_bytes": u.installed,
                        }
                        for u in result.unvendored
                    ],
                    "split_copies": [
                        {"file": c.file, "project": c.project, "version": c.version, "path": c.path}
                        for c in result.split
                    ],
                    "copies_unknown": list(result.copies_unknown),
                    "unknown": list(result.unknown),
                    "unvendored_bytes": {"wheel": result.unvendored_bytes[0], "installed": result.unvendored_bytes[1]},
                    "floors": [{"package": f.package, "floor": f.version, "why": f.why} for f in result.floors],
                    "external": [e.to_json() for e in result.external],
                    "stripped": [
                        {"file": s.member, "bytes_before": s.before, "bytes_after": s.after} for s in result.stripped
                    ],
                    "tags_dropped": list(result.tags_dropped),
                    "phases_s": {k: round(v, 3) for k, v in result.phases.items()},
                },
                indent=2,
            )
        )
        return
    _say(f"repaired: {result.wheel}")
    if quiet(click.get_current_context()):
        return
    _say(f"  CUDA major: {result.cuda_major if result.cuda_major is not None else 'none needed'}")
    _say(f"  requires:   {', '.join(result.requires) or 'nothing added'}")
    if result.kept:
        _say(f"  kept:       {', '.join(result.kept)}: the wheel's own requirement(s), kept as written")
    if result.extra is not None and result.requires:
        _say(f"  extra:      CUDA libraries required under the extra(s) {result.extra} (pip install 'NAME[EXTRA]')")
    elif result.extra is not None:
        _say(f"  extra:      the project's extra {result.extra} installs its CUDA libraries; nothing added to it")
    if result.optional:
        _say(
            f"  optional:   {', '.join(result.optional)}: needed by optional parts of the package only (imported "
            "under try/except ImportError); not required, as `slimwheel check` notes"
        )
    for f in result.floors:
        _say(f"  floor:      {f.package}>={f.version}: {f.why}")
    _say(f"  bundled:    {', '.join(result.bundled) or 'nothing'}")
    for u in result.unvendored:
        _say(f"  unvendored: {u.file} -> {u.replaced_by or 'dropped (its library loads it)'} from {u.package}")
    for c in result.split:
        _say(f"  split:      {c} (--split-shared-copies): the process maps both copies")
    for why in result.copies_unknown:
        _say(f"  unknown:    whether a requirement ships the same copies: {why}")
    for why in result.unknown:
        _say(f"  unknown:    {why} (`slimwheel check` fails this with exit {ExitCode.UNKNOWN:d} unless --unknown note)")
    if result.unvendored:
        packed, installed = result.unvendored_bytes
        _say(f"  saved:      {mib(packed)} ({packed} bytes) of the wheel, {mib(installed)} installed")
    for s in result.stripped:
        _say(f"  stripped:   {s.line()}")
    for e in result.external:
        _say(f"  external:   {e.pattern} from {e.requirement} (in {e.folder})")
    for d in result.rpath_dropped:
        _say(f"  dropped:    unsafe RPATH entry {d}")
    if result.tags_dropped:
        _say(
            f"  dropped:    platform tag(s) {', '.join(result.tags_dropped)}: older than the files' symbol versions "
            "allow (pip would install the wheel where its import fails)"
        )
    if result.loader:
        _say(f"  loader:     {', '.join(result.loader)}")


def _say(text: str) -> None:
    click.echo(shown.terminal(text))
