#!/bin/bash
# On the H200: the debian11 sysroot (carried, without lto1/cc1/sanitizers) compiles faiss 1.15 sources with g++ 10 and
# the machine's nvcc 13.0 (-ccbin), links them, and the root's ld.so loads the result (lab/gpu/sysroot_probe.sh; carry .dev/i25 with debian11.tar.gz and the faiss tarball)
set -u
d=/tmp/i25; rm -rf "$d"; mkdir -p "$d"; cd "$d" || exit 2
tar xzf "$OLDPWD/.dev/i25/debian11.tar.gz"; tar xzf "$OLDPWD/.dev/i25/faiss-1.15.0-02dbb4e.tar.gz"
S=$d/debian11; NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc); CUDA=$(dirname "$(dirname "$NVCC")")
echo "host: $(ldd --version | head -1); $(as --version | head -1); nvcc: $("$NVCC" --version | tail -2 | head -1)"
"$S/bin/g++" --version | head -1
cd faiss-1.15.0-02dbb4e || exit 2
t0=$(date +%s)
for f in faiss/IndexFlat.cpp faiss/utils/distances.cpp faiss/impl/ProductQuantizer.cpp faiss/IndexIVFPQ.cpp faiss/utils/utils.cpp faiss/IndexHNSW.cpp faiss/index_factory.cpp faiss/Clustering.cpp faiss/utils/random.cpp faiss/impl/ScalarQuantizer.cpp; do
  "$S/bin/g++" -std=c++17 -O3 -fPIC -fopenmp -mavx2 -mfma -DFINTEGER=int -I. -c "$f" -o "$d/$(echo "$f" | tr / _).o" || echo "FAILED $f" &
done
"$NVCC" -ccbin "$S/bin/g++" -std=c++17 -O3 -Xcompiler -fPIC -gencode arch=compute_90,code=sm_90 -I. -c faiss/gpu/utils/DeviceUtils.cu -o "$d/DeviceUtils.o" || echo "FAILED nvcc"
wait
echo "compiled in $(( $(date +%s) - t0 )) s"
"$S/bin/g++" -shared -fopenmp -o "$OUT/libfaiss_probe_h200.so" "$d"/*.o -L"$CUDA/lib64" -lcudart && echo linked
"$S/lib64/ld-linux-x86-64.so.2" --library-path "$S/lib/x86_64-linux-gnu:$S/usr/lib/x86_64-linux-gnu:$CUDA/lib64" --list "$OUT/libfaiss_probe_h200.so" > "$OUT/ldso.txt" 2>&1; cat "$OUT/ldso.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
