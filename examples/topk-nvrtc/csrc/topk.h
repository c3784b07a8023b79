// The host interface of the top-k kernels, the same for both builds: csrc/precompiled.cu (nvcc, every instantiation
// in the fatbin) and csrc/runtime.cpp (NVRTC at run time). No CUDA types, so that runtime.cpp needs no CUDA headers.
#pragma once

#include <string>

namespace topk {

enum class Dtype { f32, f64 };

constexpr int kMaxK = 2048;
constexpr int kKs[] = {32, 64, 128, 256, 512, 1024, 2048};

// The instantiation that serves k: the smallest K >= k (0 when k > kMaxK).
inline int bucket(int k) {
  for (int K : kKs)
    if (k <= K) return K;
  return 0;
}

// Loads (precompiled: the lazily loaded kernel; runtime: compiles or reads the disk cache) the kernel for (dtype, K),
// for the current device, without launching it.
void prepare(Dtype dtype, int K);

// rows blocks of `select<T, K>` on device pointers; values rows x K of dtype, indices rows x K int32.
void launch(Dtype dtype, int K, const void* x, int rows, int n, void* values, int* indices, void* stream);

// "precompiled" or "runtime", plus where NVRTC and the cache are (runtime build).
std::string describe();

}  // namespace topk
