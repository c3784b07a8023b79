// The k smallest values of each row, with their column indices, sorted: one block per row. Templated over the element
// type and k, which is what makes a precompiled library large (every instantiation for every architecture) and what
// runtime compilation avoids (only the instantiations a process uses, for its GPU).
//
// The same file is compiled by nvcc (csrc/precompiled.cu) and embedded for NVRTC (csrc/runtime.cpp), so it uses
// nothing NVRTC lacks: no host headers, infinity from bit patterns.
#pragma once

#include "topk_sort.cuh"

namespace topk {

// Enumerators, not `constexpr int` variables: NVRTC (13.0) emits a namespace-scope constexpr variable as module data
// (.nv.global.init, 8 bytes for these two), and a module with data of its own takes device memory for it when loaded;
// nvcc folds them away. `cuobjdump -res-usage` of the NVRTC cubin shows GLOBAL:8 with variables, GLOBAL:0 with these.
enum : int { kThreads = 256 };
enum : int { kNoIndex = 0x7fffffff };

template <class T>
__device__ __forceinline__ T infinity();
template <>
__device__ __forceinline__ float infinity<float>() {
  return __int_as_float(0x7f800000);
}
template <>
__device__ __forceinline__ double infinity<double>() {
  return __longlong_as_double(0x7ff0000000000000ll);
}

// x: rows x n, row-major. out_values / out_indices: rows x K. Columns past n (n < K) come out as (inf, kNoIndex).
// The best K so far sit sorted in [0, K); each chunk of K columns is sorted in [K, 2K), then the two are merged by
// taking the pairwise minimum against the reversed chunk (a bitonic sequence) and sorting that.
template <class T, int K>
__global__ void __launch_bounds__(kThreads) select(const T* __restrict__ x, int n, T* __restrict__ out_values,
                                                   int* __restrict__ out_indices) {
  __shared__ T v[2 * K];
  __shared__ int idx[2 * K];
  const T* row = x + static_cast<long long>(blockIdx.x) * n;
  for (int i = threadIdx.x; i < K; i += kThreads) {
    v[i] = infinity<T>();
    idx[i] = kNoIndex;
  }
  for (int base = 0; base < n; base += K) {
    for (int i = threadIdx.x; i < K; i += kThreads) {
      const int col = base + i;
      v[K + i] = col < n ? row[col] : infinity<T>();
      idx[K + i] = col < n ? col : kNoIndex;
    }
    __syncthreads();
    bitonic_sort<T, K, kThreads>(v + K, idx + K);
    for (int i = threadIdx.x; i < K; i += kThreads) {
      const int j = 2 * K - 1 - i;
      if (before(v[j], idx[j], v[i], idx[i])) {
        v[i] = v[j];
        idx[i] = idx[j];
      }
    }
    __syncthreads();
    bitonic_merge<T, K, kThreads>(v, idx);
  }
  T* out_v = out_values + static_cast<long long>(blockIdx.x) * K;
  int* out_i = out_indices + static_cast<long long>(blockIdx.x) * K;
  for (int i = threadIdx.x; i < K; i += kThreads) {
    out_v[i] = v[i];
    out_i[i] = idx[i];
  }
}

}  // namespace topk
