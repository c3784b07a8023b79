#!/usr/bin/env bash
# Unpack the faiss source tree the faiss/ recipe builds in tests and CI (upstream faiss main at 1.15.0, commit
# 02dbb4e) into the slimwheel cache, and install the `upstream` profile's system BLAS (OpenBLAS) with apt.
#
#   scripts/fetch-faiss.sh                   -> prints the source folder (last line of stdout)
#   scripts/fetch-faiss.sh --no-deps         -> source only (configure tests of the slim profile need no apt package)
#   scripts/fetch-faiss.sh --tarball FILE    -> unpack FILE (default: $FAISS_TARBALL, else the team's copy in
#                                               ../shared/faiss-src/ beside the repository, else GitHub's archive)
#
# The tree goes to ${SLIMWHEEL_CACHE:-${XDG_CACHE_HOME:-~/.cache}/slimwheel}/src/faiss-1.15.0-02dbb4e and is never
# written inside the repository; a second run with the tree present does nothing (the recipe treats it as read-only).
# Users build their own checkout instead: FAISS_SOURCE_DIR=/path/to/faiss (faiss/README.md).
set -euo pipefail

FAISS_COMMIT=02dbb4e42f49aa2ce57cd78977b0e47a11f7cb91
FAISS_VERSION=1.15.0
NAME="faiss-$FAISS_VERSION-${FAISS_COMMIT:0:7}"
# sha256 of the team's tarball (../shared/faiss-src/README.md); GitHub's archive of the commit is checked by content.
TARBALL_SHA256=5393670d237cad440a9ed0b6a305d4127e36370db53adc35f2d40fdad308d631

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
want_deps=1
tarball="${FAISS_TARBALL:-}"
while [ $# -gt 0 ]; do
  case "$1" in
    --no-deps) want_deps=0 ;;
    --tarball) [ $# -ge 2 ] || { echo "fetch-faiss.sh: --tarball needs a file" >&2; exit 2; }; tarball="$2"; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "fetch-faiss.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

cache="${SLIMWHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/slimwheel}"
dest="$cache/src/$NAME"
log() { echo "fetch-faiss: $*" >&2; }

if [ "$want_deps" = 1 ] && ! dpkg -s libopenblas-dev >/dev/null 2>&1; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  log "installing libopenblas-dev (the upstream profile's BLAS, vendored by repair)"
  # wait up to 10 minutes for another apt holding the dpkg and list locks, instead of failing at once
  $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends \
    libopenblas-dev >&2
fi

if [ -f "$dest/faiss/gpu/GpuIndex.h" ]; then
  log "source already in $dest"
  echo "$dest"
  exit 0
fi

mkdir -p "$cache/src"
work="$(mktemp -d "$cache/src/.faiss-fetch.XXXXXX")"
trap 'rm -rf "$work"' EXIT
if [ -z "$tarball" ] && [ -f "$here/../shared/faiss-src/$NAME.tar.gz" ]; then
  tarball="$here/../shared/faiss-src/$NAME.tar.gz"
fi
if [ -n "$tarball" ]; then
  [ -f "$tarball" ] || { echo "fetch-faiss.sh: $tarball: no such file" >&2; exit 1; }
  got="$(sha256sum "$tarball" | cut -d' ' -f1)"
  if [ "$got" != "$TARBALL_SHA256" ]; then
    echo "fetch-faiss.sh: $tarball: sha256 $got, expected $TARBALL_SHA256 (faiss $FAISS_VERSION at ${FAISS_COMMIT:0:7})" >&2
    exit 1
  fi
else
  tarball="$work/faiss.tar.gz"
  log "downloading faiss $FAISS_COMMIT from GitHub"
  curl -fsSL --retry 3 -o "$tarball" "https://github.com/facebookresearch/faiss/archive/$FAISS_COMMIT.tar.gz"
fi
tar -xzf "$tarball" -C "$work" --no-same-owner
tree="$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'faiss-*' | head -n1)"
if [ -z "$tree" ] || [ ! -f "$tree/faiss/gpu/GpuIndex.h" ] \
    || ! grep -Eq "^[[:space:]]*VERSION ${FAISS_VERSION}[[:space:]]*$" "$tree/CMakeLists.txt"; then
  echo "fetch-faiss.sh: $tarball holds no faiss $FAISS_VERSION tree with faiss/gpu" >&2
  exit 1
fi
mv "$tree" "$dest.tmp.$$"
mv "$dest.tmp.$$" "$dest"
log "source in $dest"
echo "$dest"
