"""The corpus of real GPU wheels from PyPI (issue 22 item 8): pinned files, downloaded once into a cache, and
NVIDIA's cuobjdump (from the `nvidia-cuda-cuobjdump` wheel) as the independent reader of their device code.

A download that fails raises: nothing is skipped silently. The cache is `<slimwheel cache>/corpus` (fsutil.cache_dir:
~/.cache/slimwheel/corpus unless SLIMWHEEL_CACHE says otherwise); files land there through a temporary name.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from slimwheel import fsutil


@dataclass(frozen=True, kw_only=True)
class CorpusWheel:
    requirement: str  # name==version
    filename: str  # the exact file pip must bring (python and platform chosen below)
    python: str = "3.11"
    why: str = ""  # what it stands for in the corpus
    require: str = "7.5-12.0"  # the GPUs its maintainers mean it for (check --require-arch)


PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_26_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux_2_5_x86_64",
    "manylinux1_x86_64",
)

# spconv-cu126 is also read alone, beside its requirement cumm-cu126 (test_repair_unvendor.py)
SPCONV = CorpusWheel(
    requirement="spconv-cu126==2.3.8",
    filename="spconv_cu126-2.3.8-cp311-cp311-manylinux_2_28_x86_64.whl",
    why="the same auditwheel copy of cudart as its requirement cumm-cu126 (libcudart-53d54daa.so.12.6.68); 195 of "
    "its 606 containers hold no kernels",
)
CORPUS: tuple[CorpusWheel, ...] = (
    CorpusWheel(
        requirement="cupy-cuda13x==14.2.0",
        filename="cupy_cuda13x-14.2.0-cp311-cp311-manylinux2014_x86_64.whl",
        why="CUDA libraries through the extra ctk; NCCL and cuTENSOR; NVRTC",
    ),
    CorpusWheel(
        requirement="bitsandbytes==0.50.2",
        filename="bitsandbytes-0.50.2-py3-none-manylinux_2_24_x86_64.whl",
        why="seven per-CUDA alternatives, one loaded per process",
        require="auto",
    ),
    CorpusWheel(
        requirement="jax-cuda13-plugin==0.12.0.1",
        python="3.12",
        filename="jax_cuda13_plugin-0.12.0.1-cp312-cp312-manylinux_2_27_x86_64.whl",
        why="RPATH into site-packages/nvidia/cu13/lib, repeated",
    ),
    CorpusWheel(
        requirement="jax-cuda13-pjrt==0.12.0.1",
        filename="jax_cuda13_pjrt-0.12.0.1-py3-none-manylinux_2_27_x86_64.whl",
        why="one 378 MiB library",
    ),
    CorpusWheel(
        requirement="faiss-gpu-cu12==1.14.1.post1",
        filename="faiss_gpu_cu12-1.14.1.post1-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        why="SASS 7.0 and 8.0 only: no Hopper",
        require="7.0-12.0",
    ),
    CorpusWheel(
        requirement="faiss-gpu==1.15.1",
        filename="faiss_gpu-1.15.1-cp310-abi3-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
        why="Meta's wheel: SASS 7.0-9.0 + PTX 9.0, OpenBLAS vendored",
        require="7.0-12.0",
    ),
    CorpusWheel(
        requirement="nvidia-cufft==12.5.0.14",
        filename="nvidia_cufft-12.5.0.14-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
        why="18,227 fatbin containers in .data",
    ),
    CorpusWheel(
        requirement="cumm-cu120==0.6.3",
        filename="cumm_cu120-0.6.3-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        why="vendors libcudart and libnvrtc renamed by auditwheel; compiles its kernels with NVRTC",
        require="none",
    ),
    CorpusWheel(
        requirement="nvidia-curand==10.4.0.35",
        filename="nvidia_curand-10.4.0.35-py3-none-manylinux_2_27_x86_64.whl",
        why="an NVIDIA library wheel of CUDA 13",
    ),
    CorpusWheel(
        requirement="nvidia-cudnn-cu13==9.28.1.4",
        filename="nvidia_cudnn_cu13-9.28.1.4-py3-none-manylinux_2_27_x86_64.whl",
        why="per-generation kernels (sm_90a, sm_100f ...) picked by GPU: 9.0-12.0 once said unserved",
    ),
    CorpusWheel(
        requirement="ctranslate2==4.8.5",
        filename="ctranslate2-4.8.5-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
        why="opens libcublas.so.12 and libnccl.so.2 with dlopen and requires neither",
        require="7.0-12.0",
    ),
    CorpusWheel(
        requirement="torchvision==0.26.0",
        filename="torchvision-0.26.0-cp311-cp311-manylinux_2_28_x86_64.whl",
        why="a torch extension (torch==2.11.0) carrying libcudart and nvJPEG copies renamed libX.<hash>.so.13",
    ),
    CorpusWheel(
        requirement="onnxruntime-gpu==1.31.1",
        filename="onnxruntime_gpu-1.31.1-cp311-cp311-manylinux_2_28_x86_64.whl",
        why="cuBLAS through its extra cudnn (nvidia-cudnn-cu13 requires it); sm_90a and sm_120a, no Blackwell 10.x",
    ),
    # Issue 37: modules with no kernels, wheels that compile at run time or have no device code, alternatives by
    # folder, a vendored copy shared with a requirement, torch wording.
    CorpusWheel(
        requirement="nvidia-npp==13.2.0.93",
        filename="nvidia_npp-13.2.0.93-py3-none-manylinux_2_27_x86_64.whl",
        why="two of 210 containers hold one empty sm_75 cubin each; the others SASS 7.5-12.1",
    ),
    CorpusWheel(
        requirement="deepspeed-kernels==0.0.1.dev1698255861",
        filename="deepspeed_kernels-0.0.1.dev1698255861-py3-none-manylinux1_x86_64.whl",
        why="one container with no kernels beside those with SASS",
        require="8.0-12.0",
    ),
    CorpusWheel(
        requirement="cuda-cccl==1.2.1",
        filename="cuda_cccl-1.2.1-cp311-cp311-manylinux_2_26_x86_64.whl",
        why="cu12/ and cu13/ sibling folders, one imported; every module empty: kernels compiled at run time",
    ),
    CorpusWheel(
        requirement="torch-memory-saver==0.0.10",
        filename="torch_memory_saver-0.0.10-cp39-abi3-manylinux2014_x86_64.whl",
        why="allocation hooks: no device code at all",
    ),
    CorpusWheel(
        requirement="autoawq-kernels==0.0.9",
        filename="autoawq_kernels-0.0.9-cp311-cp311-manylinux2014_x86_64.whl",
        why="a classic-ABI torch extension under torch>=2.5.1: serves the torch it was built for",
        require="8.0-9.0",  # SASS 7.5-9.0, but awq_v2_ext only 8.0 and up
    ),
    CorpusWheel(
        requirement="cumm-cu126==0.7.11",
        filename="cumm_cu126-0.7.11-cp311-cp311-manylinux_2_28_x86_64.whl",
        why="the auditwheel copy of libcudart that spconv-cu126 2.3.8 (cumm-cu126<0.8) vendors too: a process maps one",
        require="none",  # kernels compiled at run time with NVRTC, as cumm-cu120's
    ),
    SPCONV,
    CorpusWheel(
        requirement="nvidia-dali-cuda130==2.4.0",
        filename="nvidia_dali_cuda130-2.4.0-py3-none-manylinux_2_28_x86_64.whl",
        why="RUNPATH /usr/local/cuda/lib64 before $ORIGIN/../cu13/lib: a system toolkit's libraries shadow the "
        "nvidia-* wheels' it opens",
    ),
)
# Wheels whose libraries come through a requirement's requirement (read from the index by `check`): RAPIDS'.
RMM = CorpusWheel(
    requirement="rmm-cu12==26.10.0",
    filename="rmm_cu12-26.10.0-cp311-abi3-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl",
    why="librapids_logger.so through librmm-cu12 -> rapids-logger",
)
PYLIBRAFT = CorpusWheel(
    requirement="pylibraft-cu12==26.10.0",
    filename="pylibraft_cu12-26.10.0-cp311-abi3-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl",
    why="cuSOLVER, cuBLAS, cuSPARSE, cuRAND through libraft-cu12 -> cuda-toolkit[...]==12.*",
)
CUOBJDUMP = CorpusWheel(
    requirement="nvidia-cuda-cuobjdump==13.5.37",
    filename="nvidia_cuda_cuobjdump-13.5.37-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
)


def corpus_dir() -> Path:
    d = fsutil.cache_dir() / "corpus"
    d.mkdir(parents=True, exist_ok=True)
    return d


def pip_download(
    requirement: str, python: str, folder: Path, *, expect: str = "", platforms: tuple[str, ...] = PLATFORMS
) -> Path:
    """The one wheel pip downloads for `requirement` (Linux x86_64 of `platforms`, `python`, no dependencies) into
    `folder`, through a temporary folder there. RuntimeError, with pip's output, when pip brings none, or (`expect`) another file than
    the one named: nothing then lands in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".dl-") as tmp:
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary",
            ":all:",
            "--python-version",
            python,
            *(a for p in platforms for a in ("--platform", p)),
            "-d",
            tmp,
            requirement,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        got = sorted(Path(tmp).glob("*.whl"))
        if proc.returncode != 0 or len(got) != 1 or (expect and got[0].name != expect):
            raise RuntimeError(
                f"download of {requirement}{f' ({expect})' if expect else ''} failed (exit {proc.returncode}): "
                f"{proc.stdout[-1500:]}{proc.stderr[-1500:]}; found {os.listdir(tmp)}"
            )
        target = folder / got[0].name
        os.replace(got[0], target)
    return target


def ensure(w: CorpusWheel) -> Path:
    """The wheel's path in the cache, downloaded with pip once (RuntimeError when pip cannot bring that file)."""
    target = corpus_dir() / w.filename
    if target.is_file():
        return target
    return pip_download(w.requirement, w.python, corpus_dir(), expect=w.filename)


def cuobjdump() -> Path:
    """bin/cuobjdump of the nvidia-cuda-cuobjdump wheel, unpacked once beside the corpus."""
    exe = corpus_dir() / "cuobjdump-13.5.37" / "cuobjdump"
    if exe.is_file():
        return exe
    exe.parent.mkdir(exist_ok=True)
    with (
        zipfile.ZipFile(ensure(CUOBJDUMP)) as z,
        tempfile.NamedTemporaryFile(dir=exe.parent, delete=False) as out,
        z.open("nvidia/cu13/bin/cuobjdump") as src,
    ):
        shutil.copyfileobj(src, out)
    os.chmod(out.name, 0o755)
    os.replace(out.name, exe)
    return exe


_HEADER = struct.Struct("<IHHQ")
_MAGIC = 0xBA55ED50


def containers_by_magic(data: bytes) -> list[tuple[int, int]]:
    """(offset, bytes) of every fatbin container in a file, found by its header alone (magic, version 1, a 16-byte
    header, a size that fits), wherever it lies: the independent count the report's containers are held to."""
    out = []
    pos = data.find(b"\x50\xed\x55\xba")
    while pos >= 0:
        if pos + 16 <= len(data):
            magic, version, header, size = _HEADER.unpack_from(data, pos)
            if magic == _MAGIC and version == 1 and header == 16 and size > 0 and pos + 16 + size <= len(data):
                out.append((pos, 16 + size))
                pos = data.find(b"\x50\xed\x55\xba", pos + 16 + size)
                continue
        pos = data.find(b"\x50\xed\x55\xba", pos + 1)
    return out


_LISTED = re.compile(r"^(ELF|PTX) file\s+\d+: .*?\.(sm_\w+?)\.(cubin|ptx)$", re.M)


def cuobjdump_targets(exe: Path, fatbin: Path) -> tuple[int, Counter[tuple[str, str]], str]:
    """(exit status, Counter of (sass|ptx, sm_XX) that `cuobjdump --list-elf --list-ptx` lists, its stderr)."""
    proc = subprocess.run(
        [str(exe), "--list-elf", "--list-ptx", str(fatbin)], capture_output=True, text=True, timeout=120
    )
    got: Counter[tuple[str, str]] = Counter()
    for kind, arch, _ in _LISTED.findall(proc.stdout):
        got["sass" if kind == "ELF" else "ptx", arch] += 1
    return proc.returncode, got, proc.stderr.strip()


def sample(items: Sequence[object], k: int) -> list[int]:
    """Indices of k items spread evenly over the sequence (all when there are fewer): deterministic."""
    n = len(items)
    if n <= k:
        return list(range(n))
    return sorted({round(i * (n - 1) / (k - 1)) for i in range(k)})


@dataclass(frozen=True, kw_only=True)
class ContainerCheck:
    file: str  # the wheel member
    offset: int
    ours: dict[str, int]  # "sass sm_80" -> count, as slimwheel's report reads the container
    theirs: dict[str, int]  # as cuobjdump lists it
    cuobjdump_status: int
    cuobjdump_error: str

    @property
    def agrees(self) -> bool:
        # cuobjdump's listing names a family cubin (sm_100f, CUDA 12.9+) by its base arch (sm_100)
        plain = Counter({k.removesuffix("f") if k.startswith("sass ") else k: 0 for k in self.ours})
        for k, n in self.ours.items():
            plain[k.removesuffix("f") if k.startswith("sass ") else k] += n
        return self.cuobjdump_status == 0 and dict(plain) == self.theirs


@dataclass(frozen=True, kw_only=True)
class Agreement:
    wheel: str
    containers: int  # in slimwheel's report
    by_magic: int  # found by header alone in the same files
    files_disagreeing: tuple[str, ...]  # files whose two counts differ
    checked: tuple[ContainerCheck, ...]  # the sample, read by cuobjdump one container at a time


def _key(kind: str, arch: str) -> str:
    return f"{kind} sm_{arch}"


def agreement(path: Path, *, per_wheel: int = 24) -> Agreement:
    """slimwheel's containers against the header scan (every file) and cuobjdump (a deterministic sample of
    `per_wheel` containers spread over the wheel, each cut out and listed alone)."""
    from slimwheel.inspect.scan import inspect_wheel

    report = inspect_wheel(path)
    exe = cuobjdump()
    ours = [(elf.name, fb) for elf in report.elfs for fb in elf.fatbins]
    disagreeing = []
    by_magic = 0
    with zipfile.ZipFile(path) as z, tempfile.TemporaryDirectory() as tmp:
        members = {elf.name for elf in report.elfs}
        data_of: dict[str, bytes] = {}
        for name in sorted(members):
            data = z.read(name)
            found = containers_by_magic(data)
            by_magic += len(found)
            if len(found) != sum(1 for n, _ in ours if n == name):
                disagreeing.append(name)
            data_of[name] = data if any(n == name for n, _ in ours) else b""
        checks = []
        for i in sample(ours, per_wheel):
            name, fb = ours[i]
            blob = Path(tmp) / f"c{i}.fatbin"
            blob.write_bytes(data_of[name][fb.offset : fb.offset + fb.size])
            status, theirs, err = cuobjdump_targets(exe, blob)
            mine = Counter(_key(e.kind, e.arch) for e in fb.entries if e.kind in ("sass", "ptx"))
            checks.append(
                ContainerCheck(
                    file=name,
                    offset=fb.offset,
                    ours=dict(mine),
                    theirs={f"{k} {a}": n for (k, a), n in theirs.items()},
                    cuobjdump_status=status,
                    cuobjdump_error=err.replace(str(blob), blob.name)[-300:],  # no temporary folder in records
                )
            )
    return Agreement(
        wheel=path.name,
        containers=len(ours),
        by_magic=by_magic,
        files_disagreeing=tuple(disagreeing),
        checked=tuple(checks),
    )
