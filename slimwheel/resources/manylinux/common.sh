# Shared by scripts/manylinux-cuda12.sh and scripts/manylinux-cuda13.sh (sourced, not run): installs slimwheel into
# its own virtual environment inside a manylinux container, for the repair step and the CMake module.
# shellcheck shell=bash

SLIMWHEEL_VENV=/opt/slimwheel

# install_slimwheel [PIP-SPEC]: PIP-SPEC defaults to slimwheel's source tree, mounted read-only at /slimwheel by
# `slimwheel container` (cibuildwheel's container-engine create-args).
install_slimwheel() {
  local spec="${1:-/slimwheel}"
  local py=/opt/python/cp312-cp312/bin/python
  if [[ ! -x "$py" ]]; then
    echo "manylinux: $py not found: is this a manylinux image?" >&2
    return 1
  fi
  "$py" -m venv "$SLIMWHEEL_VENV"
  "$SLIMWHEEL_VENV/bin/python" -m pip install --disable-pip-version-check --quiet "$spec"
  # The project's CMake finds slimwheel's module through slimwheel_DIR=/opt/slimwheel/cmake (set by the config).
  local cmake_dir
  cmake_dir="$("$SLIMWHEEL_VENV/bin/python" -c 'import os, slimwheel.cmake as m; print(os.path.dirname(m.__file__))')"
  ln -sfn "$cmake_dir" "$SLIMWHEEL_VENV/cmake"
  ln -sfn "$SLIMWHEEL_VENV/bin/slimwheel" /usr/local/bin/slimwheel
  slimwheel --version
}
