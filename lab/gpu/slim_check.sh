#!/usr/bin/env bash
# GPU check of slimmed and variant wheels of examples/knn: each installed in turn and run by lab/gpu/knn_check.py
# (results against NumPy, the example's pytest suite, the error without a visible device).
#
#   bash lab/gpu/slim_check.sh DIR      (KNN_CHECK=path/to/knn_check.py to use another copy of it)
#
# Expects in DIR: the universal wheel, the `slimwheel slim --archs 9.0` wheel, the sm9x variant and, as a negative
# control, the sm8x variant (no code for 9.0: a search must fail with CUDA's "no kernel image" error, not crash).
# Variant wheels are installed under their filename without the label: pip (26.x) rejects PEP 825 filenames, and a
# variant-aware installer installs the same files. Writes $OUT/<label>/knn_h200.json and $OUT/slim_h200.json.
set -uo pipefail
dir="${1:?usage: lab/gpu/slim_check.sh DIR}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${OUT:-$PWD/out}"
mkdir -p "$out"
py="${PYTHON:-python3}"
knn_check="${KNN_CHECK:-$here/gpu/knn_check.py}"
summary="$out/slim_h200.json"
tmp="$(mktemp -d)"
results=()

strip_label() {  # name-ver-py-abi-plat-label.whl -> name-ver-py-abi-plat.whl
  local base="${1%.whl}"
  echo "${base%-*}.whl"
}

for wheel in "$dir"/*.whl; do
  name="$(basename "$wheel")"
  case "$name" in
    *-sm8x.whl) label=variant-sm8x ;;
    *-sm9x.whl) label=variant-sm9x ;;
    *+slim.*) label=slim-sm90 ;;
    *) label=universal ;;
  esac
  install_as="$name"
  case "$label" in variant-*) install_as="$(strip_label "$name")" ;; esac
  mkdir -p "$tmp/$label"
  cp "$wheel" "$tmp/$label/$install_as"
  echo "=== $label: $name (installed as $install_as)"
  if [ "$label" = variant-sm8x ]; then
    "$py" -m pip install -q --no-deps --force-reinstall --no-index "$tmp/$label/$install_as"
    mkdir -p "$out/$label"
    # No cubin and no PTX for 9.0 in this wheel: the kernel launch must be refused with a Python error.
    "$py" - > "$out/$label/negative.json" <<'EOF'
import json, numpy as np, knn
try:
    knn.search(np.random.rand(1000, 16).astype("float32"), np.random.rand(4, 16).astype("float32"), 5)
    r = {"ok": False, "error": None}
except RuntimeError as e:
    r = {"ok": "no kernel image" in str(e), "error": str(e)}
print(json.dumps(r))
EOF
    rc=$?
    cat "$out/$label/negative.json"
  else
    "$py" "$knn_check" --wheel "$tmp/$label/$install_as" --out "$out/$label"
    rc=$?
  fi
  so="$("$py" -c 'import knn; print(knn._knn.__file__)')"
  listed="$(/usr/local/cuda/bin/cuobjdump --list-elf --list-ptx "$so" 2>&1 | sed 's/.*\.\(sm_[0-9a-z]*\)\.\(cubin\|ptx\)/\1.\2/' | tr '\n"' " '")"
  results+=("{\"label\": \"$label\", \"wheel\": \"$name\", \"rc\": $rc, \"cuobjdump\": \"$listed\"}")
done
{
  echo '{"schema": 1, "runs": ['
  (IFS=,; echo "${results[*]}")
  echo ']}'
} > "$summary"
cat "$summary"
