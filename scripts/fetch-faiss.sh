#!/usr/bin/env bash
# Fetch the faiss source tree the faiss/ recipe builds (Debian 12's source package, faiss 1.7.3, GPU code included)
# into the slimwheel cache, and install its build dependencies (swig, BLAS/LAPACK headers and libraries) with apt.
#
#   scripts/fetch-faiss.sh            -> prints the source folder (last line of stdout)
#   scripts/fetch-faiss.sh --no-deps  -> source only (e.g. for configure-only tests where the deps are present)
#
# Why Debian's source package: it is a signed, versioned, immutable copy of upstream faiss 1.7.3 (Debian does not
# strip faiss/gpu), reachable through the same apt mirror CI already uses. The tree goes to
# ${SLIMWHEEL_CACHE:-${XDG_CACHE_HOME:-~/.cache}/slimwheel}/src/faiss-1.7.3 and is never written inside the repo.
# A second run with the tree present does nothing (the tree is treated as read-only by the recipe).
set -euo pipefail

FAISS_VERSION=1.7.3
want_deps=1
for arg in "$@"; do
  case "$arg" in
    --no-deps) want_deps=0 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "fetch-faiss.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done

cache="${SLIMWHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/slimwheel}"
dest="$cache/src/faiss-$FAISS_VERSION"

log() { echo "fetch-faiss: $*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
  sudo=sudo
else
  sudo=
fi

# A deb-src entry of our own (never editing debian.sources); bookworm's main holds the faiss source package.
srcfile=/etc/apt/sources.list.d/slimwheel-faiss-src.sources
need_update=0
if [ ! -f "$srcfile" ]; then
  log "adding deb-src entry $srcfile"
  $sudo tee "$srcfile" >/dev/null <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  need_update=1
fi

pkgs=()
command -v dpkg-source >/dev/null || pkgs+=(dpkg-dev)
if [ "$want_deps" = 1 ]; then
  command -v swig >/dev/null || pkgs+=(swig)
  dpkg -s libopenblas-dev >/dev/null 2>&1 || pkgs+=(libopenblas-dev)
  dpkg -s liblapack-dev >/dev/null 2>&1 || pkgs+=(liblapack-dev)
fi
if [ ! -f "$dest/faiss/gpu/GpuIndex.h" ] || [ "${#pkgs[@]}" -gt 0 ]; then
  if [ "$need_update" = 1 ] || [ ! -d /var/lib/apt/lists ] || ! ls /var/lib/apt/lists/*_source_Sources* >/dev/null 2>&1; then
    log "apt-get update"
    $sudo apt-get update -qq
  fi
fi
if [ "${#pkgs[@]}" -gt 0 ]; then
  log "installing ${pkgs[*]}"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >&2
fi

if [ -f "$dest/faiss/gpu/GpuIndex.h" ]; then
  log "source already in $dest"
else
  work="$(mktemp -d "$cache/src/.faiss-fetch.XXXXXX" 2>/dev/null || { mkdir -p "$cache/src"; mktemp -d "$cache/src/.faiss-fetch.XXXXXX"; })"
  trap 'rm -rf "$work"' EXIT
  # apt's sandbox user must be able to write the download folder (else a warning and an unsandboxed download).
  chmod 755 "$work"
  log "apt-get source faiss into $work"
  # bookworm carries exactly one faiss source version (1.7.3-2); the check below refuses any other.
  (cd "$work" && apt-get source --only-source -qq faiss >&2)
  tree="$(find "$work" -mindepth 1 -maxdepth 1 -type d -name "faiss-$FAISS_VERSION*" | head -n1)"
  if [ -z "$tree" ] || [ ! -f "$tree/faiss/gpu/GpuIndex.h" ]; then
    echo "fetch-faiss.sh: apt-get source gave no faiss $FAISS_VERSION tree with faiss/gpu in $work" >&2
    exit 1
  fi
  # Debian's patches are applied by dpkg-source -x; faiss/gpu is untouched by them. Keep the changelog version for the record.
  head -n1 "$tree/debian/changelog" >"$tree/.slimwheel-debian-version"
  mkdir -p "$(dirname "$dest")"
  mv "$tree" "$dest.tmp.$$"
  mv "$dest.tmp.$$" "$dest"
  log "source in $dest ($(cat "$dest/.slimwheel-debian-version"))"
fi
echo "$dest"
