"""A usable CUDA toolkit, found on the machine or assembled: `ensure_toolkit` is the one entry point.

Order: a given root (only that), CUDA_HOME / CUDA_PATH, nvcc on PATH; the first of the requested release that compiles
and links the check program (a kernel calling cuBLAS) wins. Otherwise: CUDA 13.x is assembled from PyPI wheels
(`pypi13`), CUDA 12.x by the cuda12 module (PyPI has no CUDA 12 nvcc), CUDA 11.8 from Debian packages (`debian11`).
Every toolkit is checked once and the result kept in slimwheel's cache.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from slimwheel.cuda.versions import DEFAULT_CUDA, CudaVersion, parse_request
from slimwheel.errors import BadInputError, SlimwheelError, ToolError
from slimwheel.fsutil import cache_dir
from slimwheel.toolkit.find import candidates, check_record, checked, describe, version_matches
from slimwheel.toolkit.model import Toolkit

__all__ = ["DEFAULT_CUDA", "Toolkit", "ensure_toolkit", "find_toolkit", "parse_request", "toolkit_to_json"]

log = logging.getLogger(__name__)


def _source_of(root: Path) -> str:
    """The source label of a given root: "pypi" when slimwheel assembled it (it has the manifest), else "system"."""
    from slimwheel.toolkit.pypi13 import read_manifest

    return "pypi" if read_manifest(root) is not None else "system"


def _explained(version: CudaVersion, provide: Callable[[], Toolkit]) -> Toolkit:
    """Run a CUDA 12 or 11.8 toolkit provider; its errors (not its bugs) get why PyPI cannot serve that release and
    what to run instead. A provider's bad-input errors stay exit 3; anything else it reports is a tool failure."""
    why = {
        12: "PyPI has no CUDA 12 nvcc (nvidia-cuda-nvcc-cu12 ships ptxas and nvvm only)",
        11: "CUDA 11.8 comes from Debian 12's non-free nvidia-cuda-toolkit",
    }[version.major]
    hint = {
        12: "run scripts/setup-cuda12.sh, or set CUDA_HOME to a CUDA 12 toolkit",
        11: "run scripts/setup-cuda11.sh (Debian 12), then pass --cuda 11.8",
    }[version.major]
    try:
        return provide()
    except BadInputError as e:
        raise BadInputError(
            f"no CUDA {version} toolkit on this machine, and {why}: {e.message}", hint=e.hint or hint
        ) from None
    except SlimwheelError as e:
        raise ToolError(
            f"no CUDA {version} toolkit on this machine, and {why}: {e.message}", hint=e.hint or hint
        ) from None


def _assemble(version: CudaVersion, cache: Path) -> Toolkit:
    if version.major == 13:
        from slimwheel.toolkit.pypi13 import assemble

        log.info("CUDA %s: assembling from PyPI wheels into %s", version, cache / "toolkits")
        return assemble(version, cache)
    if version.major == 12:
        from slimwheel.toolkit.cuda12 import assemble_cuda12  # apt and dpkg: loaded only for CUDA 12

        log.info("CUDA %s: PyPI has no CUDA 12 nvcc; assembling it with slimwheel.toolkit.cuda12", version)
        return _explained(version, lambda: assemble_cuda12(version, cache))
    from slimwheel.toolkit.debian11 import find_cuda118

    return checked(_explained(version, find_cuda118), cache)


def ensure_toolkit(
    cuda: CudaVersion | None = DEFAULT_CUDA,
    *,
    root: Path | None = None,
    env: Mapping[str, str] | None = None,
    fallback: CudaVersion = DEFAULT_CUDA,
) -> Toolkit:
    """A checked toolkit of the requested release (13.0, 12.4, 11.8, parsed at the edge by `parse_request`; None: any
    found, else `fallback` assembled).

    `env` is where CUDA_HOME, CUDA_PATH, PATH and SLIMWHEEL_CACHE are read (default: os.environ); the tools themselves
    run in the process environment. Raises ToolError (exit 4) when no toolkit can be had, BadInputError (exit 3) for
    a request slimwheel cannot serve or a given root of another release.
    """
    e = os.environ if env is None else env
    wanted = cuda
    cache = cache_dir(dict(e))
    if root is not None:
        (cand,) = candidates(Path(root), e)
        if not cand.nvcc.exists():
            raise ToolError(
                f"no nvcc in {root}: {cand.nvcc} does not exist",
                hint="pass the folder that holds bin/nvcc (e.g. /usr/local/cuda), or leave --root out "
                "to find or assemble a toolkit",
            )
        tk = describe(cand.nvcc, source=_source_of(Path(root)))
        if not version_matches(tk.version, wanted):
            raise BadInputError(f"{root} holds CUDA {tk.version}, but CUDA {wanted} was asked for")
        return checked(tk, cache)
    if wanted is not None and wanted.major == 11:
        return _assemble(wanted, cache)  # Debian's layout and its g++-11 are known to debian11, not to a PATH search
    skipped: list[str] = []
    for cand in candidates(None, e):
        if not cand.nvcc.exists():
            skipped.append(f"{cand.origin}: {cand.nvcc} does not exist")
            continue
        try:
            tk = describe(cand.nvcc, source="system")
            if not version_matches(tk.version, wanted):
                skipped.append(f"{cand.origin}: {cand.nvcc} is CUDA {tk.version}")
                continue
            return checked(tk, cache)
        except ToolError as err:
            skipped.append(f"{cand.origin}: {cand.nvcc} failed: {err.message.splitlines()[0]}")
    for why in skipped:  # a failed check was logged when it ran; this repeats it only at debug level
        log.debug("toolkit skipped: %s", why)
    return _assemble(wanted or fallback, cache)


def toolkit_to_json(tk: Toolkit, *, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What `slimwheel toolkit --format json` prints and the build report embeds (versioned)."""
    from slimwheel.toolkit.find import check_record, nvcc_release
    from slimwheel.toolkit.pypi13 import manifest_of

    cache = cache_dir(dict(os.environ if env is None else env))
    _, full = nvcc_release(tk.nvcc)
    manifest = manifest_of(tk)
    return {
        "schema": 1,
        "version": full,
        "release": str(tk.version),
        "cuda_major": tk.major,
        "source": tk.source,
        "root": str(tk.root),
        "nvcc": str(tk.nvcc),
        "supported": [str(c) for c in tk.supported],
        "components": list(tk.components),
        "static_libs": {k: str(v) for k, v in sorted(tk.static_libs.items())},
        "has_static_libs": bool(tk.static_libs),
        "nvprune": str(tk.nvprune) if tk.nvprune else None,
        "cuobjdump": str(tk.cuobjdump) if tk.cuobjdump else None,
        "host_compiler": str(tk.host_compiler) if tk.host_compiler else None,
        "include_dirs": [str(d) for d in tk.include_dirs],
        "lib_dirs": [str(d) for d in tk.lib_dirs],
        "env": dict(tk.env),
        "packages": manifest["installed"] if manifest else None,
        "check": manifest["check"] if manifest else check_record(tk, cache),
    }


def find_toolkit(
    cuda: CudaVersion | None = None, *, root: Path | None = None, env: Mapping[str, str] | None = None
) -> Toolkit | None:
    """A toolkit of the requested release that is already here (given root, CUDA_HOME, PATH, slimwheel's cache),
    without assembling or checking anything; None if there is none. For `slimwheel plan`, which must not download."""
    e = os.environ if env is None else env
    wanted = cuda
    if root is not None:
        nvcc = Path(root) / "bin" / "nvcc"
        if not nvcc.exists():
            raise ToolError(f"no nvcc in {root}: {nvcc} does not exist")
        tk = describe(nvcc, source=_source_of(Path(root)))
        if not version_matches(tk.version, wanted):  # as ensure_toolkit: a plan must be for the release asked for
            raise BadInputError(f"{root} holds CUDA {tk.version}, but CUDA {wanted} was asked for")
        return tk
    if wanted is not None and wanted.major == 11:
        try:
            from slimwheel.toolkit.debian11 import find_cuda118

            return find_cuda118()  # looks at files only; installs nothing
        except (ImportError, SlimwheelError):
            return None
    for cand in candidates(None, e):
        if not cand.nvcc.exists():
            continue
        try:
            tk = describe(cand.nvcc, source="system")
        except ToolError:
            continue
        record = check_record(tk, cache_dir(dict(e)))
        if version_matches(tk.version, wanted) and (record is None or record.get("ok")):
            return tk  # a toolkit that failed its check is not the one a build would use
    nvcc = cache_dir(dict(e)) / "toolkits" / f"cuda-{wanted or DEFAULT_CUDA}" / "bin" / "nvcc"
    if nvcc.exists():
        try:
            return describe(nvcc, source="pypi" if (wanted or DEFAULT_CUDA).major == 13 else "assembled")
        except ToolError:
            return None
    return None
