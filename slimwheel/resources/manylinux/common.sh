# Shared by cuda12.sh and cuda13.sh (sourced, not run): installs slimwheel into its own virtual environment inside a
# manylinux container, for the repair step and the CMake module. These scripts are package data of slimwheel
# (`slimwheel container` mounts their folder read-only at /slimwheel-scripts), so an installed slimwheel needs no
# source checkout.
# shellcheck shell=bash

SLIMWHEEL_VENV=/opt/slimwheel

# install_slimwheel PIP-SPEC: what `slimwheel container` chose: /slimwheel (a source checkout it mounted), or a
# requirement such as slimwheel==0.4.0 (an installed slimwheel: the same version from the package index).
install_slimwheel() {
  local spec="$1"
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
