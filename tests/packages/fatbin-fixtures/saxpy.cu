// A small kernel for fatbin fixtures: one shared library with SASS and PTX for several targets.
// slimwheel_probe() runs it end to end, so a GPU can confirm what size-report predicts (lab/gpu/inspect_check.py).
#include <cuda_runtime.h>
#include <stdlib.h>

__global__ void saxpy(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

extern "C" int slimwheel_saxpy(int n, float a, const float* x, float* y) {
  saxpy<<<(n + 255) / 256, 256>>>(n, a, x, y);
  return static_cast<int>(cudaGetLastError());
}

// 0: the kernel ran and computed 3 * 1 + 2 = 5 everywhere; > 0: the CUDA error (209: no kernel image for this GPU);
// -1: it ran but computed something else.
extern "C" int slimwheel_probe(void) {
  const int n = 1 << 16;
  float* h = static_cast<float*>(malloc(n * sizeof(float)));
  float *x = nullptr, *y = nullptr;
  cudaError_t e = cudaMalloc(&x, n * sizeof(float));
  if (e == cudaSuccess) e = cudaMalloc(&y, n * sizeof(float));
  for (int i = 0; i < n; ++i) h[i] = 1.0f;
  if (e == cudaSuccess) e = cudaMemcpy(x, h, n * sizeof(float), cudaMemcpyHostToDevice);
  for (int i = 0; i < n; ++i) h[i] = 2.0f;
  if (e == cudaSuccess) e = cudaMemcpy(y, h, n * sizeof(float), cudaMemcpyHostToDevice);
  if (e == cudaSuccess) e = static_cast<cudaError_t>(slimwheel_saxpy(n, 3.0f, x, y));
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e == cudaSuccess) e = cudaMemcpy(h, y, n * sizeof(float), cudaMemcpyDeviceToHost);
  int rc = static_cast<int>(e);
  for (int i = 0; rc == 0 && i < n; ++i) {
    if (h[i] != 5.0f) rc = -1;
  }
  cudaFree(x);
  cudaFree(y);
  free(h);
  return rc;
}
