"""Records the CUDA pins of a torch release from PyPI's metadata (PEP 658, no multi-GB download) into
tests/data/torch-pins.json, for the test that resolves a slim wheel beside torch offline.

    python -m devtools.torch_pins 2.11.0
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from packaging.requirements import Requirement

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "torch-pins.json"


def pip_report(*reqs: str) -> list[dict[str, object]]:
    """What pip would install for `reqs` (a dry run's --report, `install` items): PyPI's metadata without installing."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "r.json"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--dry-run",
                "--ignore-installed",
                "--report",
                str(report),
                *reqs,
            ],
            check=True,
        )
        items: list[dict[str, object]] = json.loads(report.read_text())["install"]
        return items


def main() -> None:
    version = sys.argv[1] if len(sys.argv) > 1 else "2.11.0"
    (torch,) = pip_report("--no-deps", f"torch=={version}")
    meta = torch["metadata"]
    assert isinstance(meta, dict)
    cuda = [r for r in meta["requires_dist"] if Requirement(r).name in ("cuda-toolkit",)]
    pins = {}
    for item in pip_report(*(r.split(";")[0] for r in cuda)):
        m = item["metadata"]
        assert isinstance(m, dict)
        if str(m["name"]).startswith("nvidia-"):
            pins[str(m["name"])] = str(m["version"])
    data = {"torch": version, "cuda_requires": cuda, "resolved": dict(sorted(pins.items()))}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
