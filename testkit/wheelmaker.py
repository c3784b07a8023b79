"""Make valid wheels (zip + METADATA + WHEEL + RECORD) from in-memory files, for tests of any area.

make_wheel(tmp_path, name="demo", version="1.0", files={"demo/_ext.so": so_bytes},
           requires=("nvidia-cuda-runtime==13.*",), tag="cp312-abi3-manylinux_2_28_x86_64")
"""

from __future__ import annotations

import base64
import hashlib
import re
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def wheel_filename(name: str, version: str, tag: str) -> str:
    return f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}-{tag}.whl"


def make_wheel(
    out_dir: Path,
    *,
    name: str = "demo",
    version: str = "1.0",
    files: Mapping[str, bytes] = {},
    requires: Iterable[str] = (),
    tag: str = "cp312-abi3-manylinux_2_28_x86_64",
    compression: int = zipfile.ZIP_DEFLATED,
    filename: str | None = None,
) -> Path:
    """Write the wheel into out_dir and return its path. `tag` may be a compressed tag set (a.b-c-d.e)."""
    dist = f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}.dist-info"
    py, abi, plat = tag.split("-")
    tags = [f"{p}-{a}-{pl}" for p in py.split(".") for a in abi.split(".") for pl in plat.split(".")]
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    metadata += "".join(f"Requires-Dist: {r}\n" for r in requires)
    wheel = "Wheel-Version: 1.0\nGenerator: slimwheel-tests\nRoot-Is-Purelib: false\n"
    wheel += "".join(f"Tag: {t}\n" for t in tags)
    contents = dict(files)
    contents[f"{dist}/METADATA"] = metadata.encode()
    contents[f"{dist}/WHEEL"] = wheel.encode()
    record = "".join(f"{n},{_record_hash(d)},{len(d)}\n" for n, d in contents.items()) + f"{dist}/RECORD,,\n"
    contents[f"{dist}/RECORD"] = record.encode()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / (filename or wheel_filename(name, version, tag))
    with zipfile.ZipFile(path, "w", compression=compression) as z:
        for n, d in contents.items():
            z.writestr(n, d)
    return path
