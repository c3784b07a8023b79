// Bitonic sorting networks over (value, index) pairs in shared memory, used by topk.cuh. Compiled by nvcc (the
// precompiled build) and by NVRTC (the runtime build), so it includes nothing from the host's standard library.
#pragma once

namespace topk {

// Total order: smaller value first, then smaller index; results are the same whatever the thread schedule.
template <class T>
__device__ __forceinline__ bool before(T av, int ai, T bv, int bi) {
  return av < bv || (av == bv && ai < bi);
}

template <class T>
__device__ __forceinline__ void order(T* v, int* idx, int lo, int hi) {
  if (before(v[hi], idx[hi], v[lo], idx[lo])) {
    T tv = v[lo];
    v[lo] = v[hi];
    v[hi] = tv;
    int ti = idx[lo];
    idx[lo] = idx[hi];
    idx[hi] = ti;
  }
}

// Sorts n = 2^m pairs ascending with `threads` threads (every thread of the block calls it).
template <class T, int N, int Threads>
__device__ void bitonic_sort(T* v, int* idx) {
  for (int size = 2; size <= N; size <<= 1) {
    for (int stride = size / 2; stride > 0; stride >>= 1) {
      for (int t = threadIdx.x; t < N / 2; t += Threads) {
        const int lo = 2 * t - (t & (stride - 1));
        const int hi = lo + stride;
        if ((lo & size) == 0) {
          order(v, idx, lo, hi);
        } else {
          order(v, idx, hi, lo);
        }
      }
      __syncthreads();
    }
  }
}

// Sorts a bitonic sequence of N pairs ascending.
template <class T, int N, int Threads>
__device__ void bitonic_merge(T* v, int* idx) {
  for (int stride = N / 2; stride > 0; stride >>= 1) {
    for (int t = threadIdx.x; t < N / 2; t += Threads) {
      const int lo = 2 * t - (t & (stride - 1));
      order(v, idx, lo, lo + stride);
    }
    __syncthreads();
  }
}

}  // namespace topk
