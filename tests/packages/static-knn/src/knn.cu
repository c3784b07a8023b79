// A small cuBLAS-calling CUDA library for slimwheel's static-link tests and experiment.
// k=1 nearest neighbours by L2 distance: ||q||^2 + ||x||^2 - 2 q.x, the cross term by cublasSgemm (as faiss does),
// norms and the arg-min by our own kernels, so the library has both cuBLAS's device code and its own.
// Plain C entry points, loaded with ctypes: no Python headers, one .so for every Python version.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cfloat>

#define SK_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

__global__ void row_norms(const float* x, int n, int d, float* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float s = 0.f;
  for (int j = 0; j < d; ++j) s += x[(size_t)i * d + j] * x[(size_t)i * d + j];
  out[i] = s;
}

// ip is column-major n x m (cuBLAS): ip[i + j*n] = x_i . q_j
__global__ void argmin_l2(const float* ip, const float* xn, const float* qn, int n, int m, int* idx, float* dist) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= m) return;
  float best = FLT_MAX;
  int arg = -1;
  for (int i = 0; i < n; ++i) {
    float v = xn[i] + qn[j] - 2.f * ip[(size_t)j * n + i];
    if (v < best) { best = v; arg = i; }
  }
  idx[j] = arg;
  dist[j] = best;
}

int status(cudaError_t e) { return e == cudaSuccess ? 0 : 1000 + (int)e; }
int status(cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS ? 0 : 2000 + (int)s; }

#define SK_TRY(call)              \
  do {                            \
    int _rc = status(call);       \
    if (_rc != 0) { rc = _rc; goto done; } \
  } while (0)

}  // namespace

// C (m x n, row-major) = A (m x k, row-major) * B (k x n, row-major), on the GPU via cuBLAS. 0 on success.
SK_EXPORT int sk_sgemm(const float* a, const float* b, float* c, int m, int n, int k) {
  int rc = 0;
  float *da = nullptr, *db = nullptr, *dc = nullptr;
  cublasHandle_t h = nullptr;
  const float one = 1.f, zero = 0.f;
  SK_TRY(cudaMalloc(&da, sizeof(float) * m * k));
  SK_TRY(cudaMalloc(&db, sizeof(float) * k * n));
  SK_TRY(cudaMalloc(&dc, sizeof(float) * m * n));
  SK_TRY(cudaMemcpy(da, a, sizeof(float) * m * k, cudaMemcpyHostToDevice));
  SK_TRY(cudaMemcpy(db, b, sizeof(float) * k * n, cudaMemcpyHostToDevice));
  SK_TRY(cublasCreate(&h));
  // Row-major C = A B is column-major C^T = B^T A^T: swap the operands, no transposes.
  SK_TRY(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, db, n, da, k, &zero, dc, n));
  SK_TRY(cudaMemcpy(c, dc, sizeof(float) * m * n, cudaMemcpyDeviceToHost));
done:
  if (h) cublasDestroy(h);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  return rc;
}

// For each of m queries (row-major m x d), the index and squared L2 distance of its nearest of n points (n x d).
SK_EXPORT int sk_knn1(const float* x, int n, const float* q, int m, int d, int* idx, float* dist) {
  int rc = 0;
  float *dx = nullptr, *dq = nullptr, *dip = nullptr, *dxn = nullptr, *dqn = nullptr, *dd = nullptr;
  int* di = nullptr;
  cublasHandle_t h = nullptr;
  const float one = 1.f, zero = 0.f;
  SK_TRY(cudaMalloc(&dx, sizeof(float) * n * d));
  SK_TRY(cudaMalloc(&dq, sizeof(float) * m * d));
  SK_TRY(cudaMalloc(&dip, sizeof(float) * n * m));
  SK_TRY(cudaMalloc(&dxn, sizeof(float) * n));
  SK_TRY(cudaMalloc(&dqn, sizeof(float) * m));
  SK_TRY(cudaMalloc(&dd, sizeof(float) * m));
  SK_TRY(cudaMalloc(&di, sizeof(int) * m));
  SK_TRY(cudaMemcpy(dx, x, sizeof(float) * n * d, cudaMemcpyHostToDevice));
  SK_TRY(cudaMemcpy(dq, q, sizeof(float) * m * d, cudaMemcpyHostToDevice));
  row_norms<<<(n + 255) / 256, 256>>>(dx, n, d, dxn);
  row_norms<<<(m + 255) / 256, 256>>>(dq, m, d, dqn);
  SK_TRY(cudaGetLastError());
  SK_TRY(cublasCreate(&h));
  // Column-major view: X is d x n, Q is d x m; ip = X^T Q (n x m).
  SK_TRY(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, d, &one, dx, d, dq, d, &zero, dip, n));
  argmin_l2<<<(m + 127) / 128, 128>>>(dip, dxn, dqn, n, m, di, dd);
  SK_TRY(cudaGetLastError());
  SK_TRY(cudaMemcpy(idx, di, sizeof(int) * m, cudaMemcpyDeviceToHost));
  SK_TRY(cudaMemcpy(dist, dd, sizeof(float) * m, cudaMemcpyDeviceToHost));
done:
  if (h) cublasDestroy(h);
  cudaFree(dx); cudaFree(dq); cudaFree(dip); cudaFree(dxn); cudaFree(dqn); cudaFree(dd); cudaFree(di);
  return rc;
}

// The CUDA runtime and cuBLAS versions this library was built against and runs with (a static link reports its own).
SK_EXPORT int sk_versions(int* runtime, int* cublas) {
  int rc = 0;
  cublasHandle_t h = nullptr;
  SK_TRY(cudaRuntimeGetVersion(runtime));
  SK_TRY(cublasCreate(&h));
  SK_TRY(cublasGetVersion(h, cublas));
done:
  if (h) cublasDestroy(h);
  return rc;
}
