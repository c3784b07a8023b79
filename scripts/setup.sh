#!/usr/bin/env bash
# Creates .venv (Python 3.11: python3) with slimwheel installed editable plus its test tools. Idempotent: when
# .venv already has everything for the current pyproject.toml, it returns at once.
#   bash scripts/setup.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$here/.venv"
python="${PYTHON:-python3}"
stamp="$venv/.slimwheel-setup"

# What the venv was made from: re-install only when pyproject.toml or the interpreter changed.
want="$("$python" -c 'import sys; print(sys.version)')|$(sha256sum "$here/pyproject.toml" | cut -d' ' -f1)"
if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  echo "setup: $venv is up to date"
  exit 0
fi

if [[ ! -x "$venv/bin/python" ]]; then
  "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
# scikit-build-core and nanobind: for `slimwheel build --no-isolation` and the example's tests.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "${here}[test]" \
  "scikit-build-core>=0.10" "nanobind>=2.0"
printf '%s' "$want" > "$stamp"
echo "setup: $venv ready ($("$venv/bin/python" --version), slimwheel $("$venv/bin/slimwheel" --version | awk '{print $NF}'))"
