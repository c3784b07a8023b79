// Exact k-nearest-neighbour search: ||q - x||^2 = ||q||^2 + ||x||^2 - 2 q.x, the last term for all pairs at once by
// one cuBLAS SGEMM per chunk of queries, then one block per query selects the k smallest.
#include "knn.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>
#include <climits>
#include <stdexcept>
#include <string>

namespace knn {
namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    cudaGetLastError();  // a non-sticky error stays pending otherwise, and the next unrelated call reports it
    throw std::runtime_error(std::string("CUDA error in ") + what + ": " + cudaGetErrorName(err) + ": " +
                             cudaGetErrorString(err));
  }
}

void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string("cuBLAS error in ") + what + ": " + cublasGetStatusName(status) + ": " +
                             cublasGetStatusString(status));
  }
}

template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t count) { check(cudaMalloc(&ptr_, count * sizeof(T)), "cudaMalloc"); }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() const { return ptr_; }

 private:
  T* ptr_ = nullptr;
};

class Blas {
 public:
  Blas() { check(cublasCreate(&handle_), "cublasCreate"); }
  ~Blas() { cublasDestroy(handle_); }
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

constexpr int kWarp = 32;
constexpr int kSelectThreads = 128;
constexpr int kEmptyIndex = INT_MAX;

// One warp per row: sum of squares.
__global__ void row_norms(const float* __restrict__ x, int n, int d, float* __restrict__ out) {
  const int row = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= n) return;  // whole warps leave together: a warp owns one row
  const float* r = x + static_cast<size_t>(row) * d;
  float s = 0.f;
  for (int j = lane; j < d; j += kWarp) s += r[j] * r[j];
  for (int offset = kWarp / 2; offset > 0; offset /= 2) s += __shfl_down_sync(0xffffffffu, s, offset);
  if (lane == 0) out[row] = s;
}

struct Candidate {
  float dist;
  int index;
};

__device__ __forceinline__ bool before(const Candidate& a, const Candidate& b) {
  return a.dist < b.dist || (a.dist == b.dist && a.index < b.index);
}

__device__ __forceinline__ Candidate warp_min(Candidate c) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    Candidate o{__shfl_down_sync(0xffffffffu, c.dist, offset), __shfl_down_sync(0xffffffffu, c.index, offset)};
    if (before(o, c)) c = o;
  }
  return c;
}

// One block per query row of `ip` (which holds -2 q.x). Each thread keeps the K best of its strided share in a
// sorted list; then k rounds of a block-wide minimum over the list heads pick the k best in order. K is a template
// parameter so the lists have a fixed size; the host picks the smallest instantiated K >= k.
template <int K>
__global__ void __launch_bounds__(kSelectThreads)
    select_k(const float* __restrict__ ip, const float* __restrict__ query_norms, const float* __restrict__ db_norms,
             int n, int k, float* __restrict__ out_dist, int64_t* __restrict__ out_idx) {
  const int q = blockIdx.x;
  const float* row = ip + static_cast<size_t>(q) * n;
  const float qn = query_norms[q];

  Candidate list[K];
#pragma unroll
  for (int i = 0; i < K; ++i) list[i] = Candidate{FLT_MAX, kEmptyIndex};

  for (int j = threadIdx.x; j < n; j += kSelectThreads) {
    // Rounding can make the expansion slightly negative for (near) duplicates: a squared distance is not.
    Candidate c{fmaxf(qn + db_norms[j] + row[j], 0.f), j};
    if (!before(c, list[K - 1])) continue;
    int pos = K - 1;
    while (pos > 0 && before(c, list[pos - 1])) {
      list[pos] = list[pos - 1];
      --pos;
    }
    list[pos] = c;
  }

  __shared__ Candidate warp_best[kSelectThreads / kWarp];
  __shared__ Candidate best;
  int head = 0;
  const int warp = threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  for (int r = 0; r < k; ++r) {
    Candidate mine = head < K ? list[head] : Candidate{FLT_MAX, kEmptyIndex};
    Candidate w = warp_min(mine);
    if (lane == 0) warp_best[warp] = w;
    __syncthreads();
    if (threadIdx.x == 0) {
      Candidate b = warp_best[0];
      for (int i = 1; i < kSelectThreads / kWarp; ++i)
        if (before(warp_best[i], b)) b = warp_best[i];
      best = b;
      out_dist[static_cast<size_t>(q) * k + r] = b.dist;
      out_idx[static_cast<size_t>(q) * k + r] = b.index;
    }
    __syncthreads();
    // Indices are unique across threads (thread t saw j = t mod 128), so exactly one thread advances.
    if (head < K && mine.index == best.index && best.index != kEmptyIndex) ++head;
  }
}

using SelectKernel = void (*)(const float*, const float*, const float*, int, int, float*, int64_t*);

SelectKernel pick_kernel(int k) {
  if (k <= 1) return select_k<1>;
  if (k <= 8) return select_k<8>;
  if (k <= 32) return select_k<32>;
  if (k <= 64) return select_k<64>;
  return select_k<kMaxK>;
}

}  // namespace

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

std::string runtime_info() {
  int runtime = 0;
  int driver = 0;
  check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
  check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");  // 0 without a driver, not an error
  auto version = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
  return "CUDA runtime " + version(runtime) + ", driver " + (driver ? version(driver) : std::string("none"));
}

void search(const float* database, int64_t n, const float* queries, int64_t m, int64_t d, int k, float* out_dist,
            int64_t* out_idx, int device) {
  if (n < 1 || m < 0 || d < 1 || k < 1 || k > kMaxK || k > n)
    throw std::invalid_argument("knn::search: need n >= 1, d >= 1, 1 <= k <= min(n, " + std::to_string(kMaxK) + ")");
  if (n > INT_MAX || d > INT_MAX) throw std::invalid_argument("knn::search: n and d must be below 2**31");
  if (m == 0) return;

  int count = 0;
  check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (device < 0 || device >= count)
    throw std::invalid_argument("knn::search: device " + std::to_string(device) + " does not exist (" +
                                std::to_string(count) + " CUDA devices)");
  check(cudaSetDevice(device), "cudaSetDevice");

  const int ni = static_cast<int>(n);
  const int di = static_cast<int>(d);
  // Queries per chunk: the distance block (chunk x n floats) stays under 256 MiB.
  const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(m, (int64_t{64} << 20) / n));

  Blas blas;
  DeviceBuffer<float> db(static_cast<size_t>(n) * d);
  DeviceBuffer<float> db_norms(n);
  DeviceBuffer<float> q(static_cast<size_t>(chunk) * d);
  DeviceBuffer<float> q_norms(chunk);
  DeviceBuffer<float> ip(static_cast<size_t>(chunk) * n);
  DeviceBuffer<float> dist(static_cast<size_t>(chunk) * k);
  DeviceBuffer<int64_t> idx(static_cast<size_t>(chunk) * k);

  constexpr int kNormThreads = 256;
  constexpr int kRowsPerBlock = kNormThreads / kWarp;
  check(cudaMemcpy(db.get(), database, sizeof(float) * n * d, cudaMemcpyHostToDevice), "cudaMemcpy");
  row_norms<<<(ni + kRowsPerBlock - 1) / kRowsPerBlock, kNormThreads>>>(db.get(), ni, di, db_norms.get());
  check(cudaGetLastError(), "row_norms launch");

  const SelectKernel select = pick_kernel(k);
  const float alpha = -2.f;
  const float beta = 0.f;
  for (int64_t q0 = 0; q0 < m; q0 += chunk) {
    const int mc = static_cast<int>(std::min(chunk, m - q0));
    check(cudaMemcpy(q.get(), queries + q0 * d, sizeof(float) * mc * d, cudaMemcpyHostToDevice), "cudaMemcpy");
    row_norms<<<(mc + kRowsPerBlock - 1) / kRowsPerBlock, kNormThreads>>>(q.get(), mc, di, q_norms.get());
    check(cudaGetLastError(), "row_norms launch");
    // Column-major view: ip (n x mc) = db^T(d x n)^T * q^T(d x mc), i.e. row-major ip[query][point] = -2 q.x.
    check(cublasSgemm(blas.get(), CUBLAS_OP_T, CUBLAS_OP_N, ni, mc, di, &alpha, db.get(), di, q.get(), di, &beta,
                      ip.get(), ni),
          "cublasSgemm");
    select<<<mc, kSelectThreads>>>(ip.get(), q_norms.get(), db_norms.get(), ni, k, dist.get(), idx.get());
    check(cudaGetLastError(), "select_k launch");
    check(cudaMemcpy(out_dist + q0 * k, dist.get(), sizeof(float) * mc * k, cudaMemcpyDeviceToHost), "cudaMemcpy");
    check(cudaMemcpy(out_idx + q0 * k, idx.get(), sizeof(int64_t) * mc * k, cudaMemcpyDeviceToHost), "cudaMemcpy");
  }
}

}  // namespace knn
