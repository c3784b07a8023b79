// Exact k-nearest-neighbour search on the GPU: squared L2 distances by cuBLAS SGEMM, top-k by templated kernels.
#pragma once

#include <cstdint>
#include <string>

namespace knn {

// The largest k a search supports: the biggest instantiated selection kernel.
constexpr int kMaxK = 128;

// Number of CUDA devices visible, 0 when there is no GPU or no usable driver (never throws).
int device_count();

// "CUDA runtime 13.0, driver 13.0" style description; throws std::runtime_error when the runtime cannot be queried.
std::string runtime_info();

// Row-major host arrays: database n x d, queries m x d; out_dist / out_idx m x k (k in 1..kMaxK, k <= n).
// Distances are squared L2, ascending; ties are broken by the smaller index. Throws std::runtime_error with
// the CUDA or cuBLAS error name and text on any failure (no GPU, no driver, out of memory).
void search(const float* database, int64_t n, const float* queries, int64_t m, int64_t d, int k, float* out_dist,
            int64_t* out_idx, int device);

}  // namespace knn
