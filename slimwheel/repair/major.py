"""The CUDA major repair works for: the wheel's, and each per-CUDA alternative's own."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from slimwheel import deps
from slimwheel.cuda import alternatives as alt_model
from slimwheel.cuda import libs as cudalibs
from slimwheel.cuda.major import cuda_major
from slimwheel.cuda.versions import CudaVersion
from slimwheel.errors import BadInputError, CheckFailed, ExitCode
from slimwheel.inspect.dynamic import ElfInfo, carried_names


def major_for(
    elfs: Mapping[str, ElfInfo],
    *,
    requires: Sequence[str] = (),
    cuda: CudaVersion | None = None,
    wheel_name: str = "the wheel",
) -> int | None:
    """The CUDA major to repair for: the one given, else the wheel's own evidence (`cuda.major.cuda_major`). A wheel that
    needs libraries of several majors is refused (exit 12); one that needs only SONAMEs two majors share, without
    other evidence, needs --cuda (exit 3). Per-CUDA alternatives (`cuda.alternatives`) are no mixture: the major is
    that of the other files, else the newest alternative's; each alternative is repaired for its own."""
    alts = alt_model.alternatives(elfs)
    evidence = cuda_major(
        [(i.path, i.needed) for i in elfs.values() if i.path not in alts],
        requires,
        carried=carried_names(elfs.values()),
        ships=[(i.path, i.soname) for i in elfs.values() if i.path not in alts],
        name=wheel_name.split("-", 1)[0],
    )
    if evidence.major is None and cuda is None and alts:
        return max(alt_major(elfs[f], a) for f, a in alts.items())
    if evidence.mixed:
        raise CheckFailed(
            f"{wheel_name}: the wheel needs libraries of several CUDA majors ({'; '.join(evidence.mixed)}); "
            "one process cannot load both",
            ExitCode.INCONSISTENT_DEPENDENCIES,
        )
    major = cuda.major if cuda is not None else evidence.major
    if major is None and evidence.ambiguous:
        raise BadInputError(
            f"{wheel_name}: the wheel needs {', '.join(evidence.ambiguous)}, which CUDA 12 and 13 share; cannot tell "
            "the CUDA major",
            hint="pass --cuda 12.X or --cuda 13.X",
        )
    if major is None:
        return None
    if not cudalibs.libs_for(major):
        raise BadInputError(f"CUDA {major}: slimwheel's library table has no nvidia-* wheels for it")
    if wrong := deps.wrong_major([i for i in elfs.values() if i.path not in alts], major):
        raise CheckFailed(
            f"repairing for CUDA {major}, but the wheel needs libraries of another CUDA major: {'; '.join(wrong)}",
            ExitCode.INCONSISTENT_DEPENDENCIES,
        )
    return major


def alt_major(info: ElfInfo, alt: alt_model.AlternativeFile) -> int:
    """An alternative's CUDA major: from the libraries it needs, else from its name."""
    return cuda_major([(info.path, info.needed)]).major or alt.major


def file_majors(elfs: Mapping[str, ElfInfo], major: int | None) -> dict[str, int | None]:
    """Each file's CUDA major: an alternative's own (bitsandbytes' _cuda121.so: CUDA 12), else the wheel's."""
    alts = alt_model.alternatives(elfs)
    return {p: alt_major(elfs[p], alts[p]) if p in alts else major for p in elfs}
