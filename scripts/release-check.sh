#!/usr/bin/env bash
# Builds slimwheel's sdist and wheel and tests the wheel as a user gets it: `twine check`, then a fresh virtual
# environment with the wheel installed (not this checkout) runs the main job, `slimwheel build examples/knn`.
# The release workflow (.github/workflows/release.yml) runs it before publishing what it built;
# tests/integration/test_release.py runs it too.
#   bash scripts/release-check.sh OUT-DIR
# OUT-DIR gets dist/ (the sdist and the wheel), venv/ and wheelhouse/ (the example's wheel and its report).
# PYTHON: the interpreter with `build` and `twine` (default: this checkout's .venv, else python3). The example's
# [tool.slimwheel] settings can be overridden with SLIMWHEEL_* variables (the tests set SLIMWHEEL_ARCHS=8.0).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ $# -ne 1 ]]; then
  echo "usage: release-check.sh OUT-DIR" >&2
  exit 2
fi
mkdir -p "$1"
out="$(cd "$1" && pwd)"
python="${PYTHON:-}"
if [[ -z "$python" ]]; then
  if [[ -x "$here/.venv/bin/python" ]]; then python="$here/.venv/bin/python"; else python=python3; fi
fi
step() { printf '\n--- %s\n' "$1"; }

step "build the sdist and the wheel"
rm -rf "$out/dist"
"$python" -m build --outdir "$out/dist" "$here"
shopt -s nullglob
wheels=("$out"/dist/slimwheel-*.whl)
sdists=("$out"/dist/slimwheel-*.tar.gz)
if [[ ${#wheels[@]} -ne 1 || ${#sdists[@]} -ne 1 ]]; then
  echo "release-check: expected one wheel and one sdist in $out/dist" >&2
  exit 1
fi

step "twine check"
"$python" -m twine check --strict "${wheels[0]}" "${sdists[0]}"

step "a fresh virtual environment with the wheel alone"
rm -rf "$out/venv"
"$python" -m venv "$out/venv"
"$out/venv/bin/python" -m pip install --disable-pip-version-check --quiet "${wheels[0]}"
# Run from OUT-DIR: a checkout in the current folder would shadow the installed package.
cd "$out"
"$out/venv/bin/python" - "$here" <<'EOF'
import sys
from pathlib import Path

import slimwheel
import slimwheel.cmake

checkout = Path(sys.argv[1]).resolve()
where = Path(slimwheel.__file__).resolve()
if where.is_relative_to(checkout):
    sys.exit(f"release-check: slimwheel was imported from the checkout ({where}), not from the installed wheel")
cmake = Path(slimwheel.cmake.__file__).parent
missing = [n for n in ("slimwheelConfig.cmake", "SlimWheel.cmake", "SlimWheelTables.cmake") if not (cmake / n).is_file()]
if missing:
    sys.exit(f"release-check: the wheel lacks the CMake package: {missing}")
print(f"slimwheel {slimwheel.__version__} from {where.parent}")
EOF

step "the main job from the installed wheel: slimwheel build examples/knn"
# PIP_FIND_LINKS: where a project that requires slimwheel in its [build-system] finds it (no index has it).
PIP_FIND_LINKS="$out/dist" "$out/venv/bin/slimwheel" build "$here/examples/knn" --out-dir "$out/wheelhouse"
step "done: $(basename "${wheels[0]}"), $(basename "${sdists[0]}")"
