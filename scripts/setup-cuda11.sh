#!/usr/bin/env bash
# Install a real CUDA 11.8 static toolchain from Debian 12's non-free component:
# nvcc 11.8, nvprune, cuobjdump, libcublas_static.a, libcublasLt_static.a, libcudart_static.a,
# libculibos.a, with g++-11 as the host compiler (CUDA 11.8 rejects GCC 12).
#
# Idempotent: does nothing (apart from a version print) when everything is already installed.
# Needs root (apt). Used by .ci/run and by tests/integration/test_static_*.py.
set -euo pipefail

PACKAGES=(nvidia-cuda-toolkit nvidia-cuda-dev g++-11)
LIBDIR=/usr/lib/x86_64-linux-gnu
NEEDED_FILES=(
  /usr/bin/nvcc /usr/bin/nvprune /usr/bin/cuobjdump /usr/bin/g++-11
  "$LIBDIR/libcublas_static.a" "$LIBDIR/libcublasLt_static.a"
  "$LIBDIR/libcudart_static.a" "$LIBDIR/libculibos.a"
)

all_present() {
  local f
  for f in "${NEEDED_FILES[@]}"; do [ -e "$f" ] || return 1; done
  return 0
}

if all_present; then
  echo "setup-cuda11: already installed ($(/usr/bin/nvcc --version | tail -n 2 | head -n 1))"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "setup-cuda11: must run as root (apt-get install)" >&2
  exit 1
fi

# shellcheck source=/dev/null
. /etc/os-release
if [ "${VERSION_CODENAME:-}" != "bookworm" ]; then
  echo "setup-cuda11: expected Debian 12 (bookworm), found '${PRETTY_NAME:-unknown}'" >&2
  exit 1
fi

# The CUDA packages live in 'non-free' (the NVIDIA licence). Add it as a separate deb822 source so
# the system's own sources file stays untouched; same mirror and key as the main archive.
SRC=/etc/apt/sources.list.d/slimwheel-nonfree.sources
if ! grep -rqs 'non-free\b' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
   || ! apt-cache policy 2>/dev/null | grep -q 'bookworm/non-free '; then
  if [ ! -e "$SRC" ]; then
    cat > "$SRC.tmp" <<SOURCES
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
    mv "$SRC.tmp" "$SRC"
    echo "setup-cuda11: added $SRC (bookworm non-free)"
  fi
fi

export DEBIAN_FRONTEND=noninteractive
# Another apt (unattended-upgrades, a second set-up) may hold the dpkg and list locks: wait for it up to 10 minutes
# instead of failing at once.
apt=(apt-get -o DPkg::Lock::Timeout=600)
start=$(date +%s)
"${apt[@]}" update -qq
# The NVIDIA licence prompt is a debconf question; pre-accept it so the install is non-interactive.
echo "nvidia-cuda-toolkit nvidia-cuda-toolkit/license-accepted boolean true" | debconf-set-selections || true
# nvidia-cuda-dev, libcuinj64 and libnvidia-ml-dev depend on the driver's user-space libraries (libcuda1 >= 520 ...,
# or the virtual libcuda-11.8-1 that NVIDIA's own driver installs provide). A build machine has no GPU and must not get a
# driver; Debian's libcuda1 would also pull contrib's nvidia-support. So satisfy the virtual names with an empty package
# (built here with dpkg-deb) that says so: apt stays consistent, and nothing claims to be a driver at run time.
if ! dpkg -s slimwheel-no-gpu-driver >/dev/null 2>&1; then
  stub=$(mktemp -d)
  mkdir -p "$stub/pkg/DEBIAN"
  cat > "$stub/pkg/DEBIAN/control" <<CONTROL
Package: slimwheel-no-gpu-driver
Version: 1.0
Architecture: all
Maintainer: slimwheel <slimwheel@localhost>
Provides: libcuda-11.8-1, libcuda.so.1 (= 580), libnvidia-ml.so.1 (= 580)
Description: placeholder for the NVIDIA driver on a GPU-less build machine
 Lets the CUDA 11.8 development packages install without a driver. libcuda.so.1 is
 loaded at run time from the real driver on GPU machines; it is never linked.
CONTROL
  dpkg-deb --build "$stub/pkg" "$stub/slimwheel-no-gpu-driver.deb" >/dev/null
  "${apt[@]}" install -y -qq "$stub/slimwheel-no-gpu-driver.deb" >/dev/null  # apt, not dpkg -i: it waits for the lock
  rm -rf "$stub"
fi
"${apt[@]}" install -y -qq --no-install-recommends "${PACKAGES[@]}" >/dev/null
echo "setup-cuda11: apt install took $(( $(date +%s) - start )) s"

if ! all_present; then
  for f in "${NEEDED_FILES[@]}"; do [ -e "$f" ] || echo "setup-cuda11: missing after install: $f" >&2; done
  exit 1
fi
echo "setup-cuda11: installed ($(/usr/bin/nvcc --version | tail -n 2 | head -n 1))"
