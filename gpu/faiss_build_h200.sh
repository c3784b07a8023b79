#!/usr/bin/env bash
# Builds a faiss profile on the GPU machine (16 cores) in a process session of its own, so that the build outlives
# the 10-minute limit of one device call; each call of this script starts it once, then waits for it up to WAIT_S.
#   bash gpu/faiss_build_h200.sh slim        (state, log and result under /root/faiss-bg-<profile>)
# When the build is done it prints slimwheel's size report of the built wheel and copies it to
# .carry/faiss/<profile>/ so that `python3 gpu/faiss_check.py --profiles <profile>` tests it.
set -u
profile="${1:-slim}"
wait_s="${WAIT_S:-540}"
state="/root/faiss-bg-$profile"
if [[ -f "$state/rc" && "$(cat "$state/rc")" != 0 ]]; then
  echo "an earlier build of $profile failed (rc $(cat "$state/rc")); starting again"
  rm -rf "$state"
fi
mkdir -p "$state"
# slimwheel (the recipe plans with it) from this tree, its pure-Python needs from the carried wheels
python3 -m pip install -q --no-index --no-deps --target /tmp/sw-deps .carry/runtime-deps/*.whl 2>/dev/null
export PYTHONPATH="$PWD:/tmp/sw-deps${PYTHONPATH:+:$PYTHONPATH}"
if [[ ! -f "$state/started" ]]; then
  date +%s > "$state/started"
  setsid nohup bash -c "python3 gpu/faiss_check.py --build $profile --no-tests --runs 1 --n 200000 --nq 1000 \
    --out $state/out > $state/log 2>&1; echo \$? > $state/rc; date +%s > $state/finished" >/dev/null 2>&1 &
fi
end=$(( $(date +%s) + wait_s ))
while [[ ! -f "$state/rc" && $(date +%s) -lt $end ]]; do sleep 5; done
now=$(date +%s)
echo "build of $profile: $(( now - $(cat "$state/started") )) s so far; objects: $(find /tmp/faiss-check-*/build-"$profile" -name '*.o' 2>/dev/null | wc -l)"
if [[ ! -f "$state/rc" ]]; then
  tail -3 "$state/log"
  exit 3
fi
echo "finished with rc $(cat "$state/rc") after $(( $(cat "$state/finished") - $(cat "$state/started") )) s"
tail -15 "$state/log"
cp "$state"/out/*.json "${OUT:-/tmp}/" 2>/dev/null
wheel=$(find /tmp -maxdepth 4 -path "/tmp/faiss-check-*/built/$profile/*.whl" 2>/dev/null | head -1)
[[ -n "$wheel" ]] || exit 4
mkdir -p ".carry/faiss/$profile" && cp "$wheel" ".carry/faiss/$profile/"
python3 -m slimwheel size-report "$wheel" --format json -o "${OUT:-/tmp}/faiss_${profile}_size.json"
python3 -m slimwheel size-report "$wheel" | tail -40
