"""Renders slimwheel/resources/cuda-baseline.json: for each CUDA major, the component versions of its first release
(13.0) and the dynamic symbols each of its libraries exports. `slimwheel.floors` uses it to state requirement floors
that do not exceed what a wheel needs (issue 14: a build with CUDA 13.5 must still install beside torch's 13.0 pins).

Run from the repository root with the CUDA 13.0 toolkit that `slimwheel toolkit --cuda 13.0` assembled:
    python -m devtools.cuda_baseline [TOOLKIT_ROOT]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from slimwheel.cuda import libs as cudalibs
from slimwheel.fsutil import cache_dir, write_text_atomic
from slimwheel.inspect.dynamic import exported_symbols

OUT = Path(__file__).resolve().parents[1] / "slimwheel" / "resources" / "cuda-baseline.json"


def render(root: Path) -> str:
    manifest = json.loads((root / "slimwheel-toolkit.json").read_text(encoding="utf-8"))
    installed: dict[str, str] = manifest["installed"]
    release = manifest["cuda"]
    major = int(release.split(".")[0])
    packages: dict[str, dict[str, object]] = {}
    for lib in cudalibs.libs_for(major):
        path = root / "lib64" / lib.soname
        if not path.is_file() or lib.package not in installed:
            continue
        entry = packages.setdefault(lib.package, {"version": installed[lib.package], "libraries": {}})
        libraries = entry["libraries"]
        assert isinstance(libraries, dict)
        libraries[lib.soname] = sorted(exported_symbols(path))
    data = {"schema": 1, "majors": {str(major): {"release": release, "packages": packages}}}
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def main() -> None:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else cache_dir() / "toolkits" / "cuda-13.0"
    write_text_atomic(OUT, render(root))
    print(f"wrote {OUT} from {root}")


if __name__ == "__main__":
    main()
