// CUDA 12.4 toolkit check on a real GPU: built here (no GPU) with slimwheel's assembled CUDA 12.4 toolkit by
// gpu/build_cuda12_probe.sh, run on the GPU machine by gpu/cuda12_check.py. Static cudart: nothing to install there.
// Prints one JSON line: the device, the runtime/driver versions, and whether y = a*x + y came out right.
#include <cstdio>
#include <cmath>
#include <vector>
#include <cuda_runtime.h>

__global__ void saxpy(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

int main() {
  const int n = 1 << 20;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) { x[i] = float(i % 97); y[i] = float(i % 13); }
  int rt = 0, drv = 0, dev = -1;
  cudaRuntimeGetVersion(&rt);
  cudaDriverGetVersion(&drv);
  cudaDeviceProp prop{};
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess) e = cudaGetDeviceProperties(&prop, dev);
  float *dx = nullptr, *dy = nullptr;
  if (e == cudaSuccess) e = cudaMalloc(&dx, n * sizeof(float));
  if (e == cudaSuccess) e = cudaMalloc(&dy, n * sizeof(float));
  if (e == cudaSuccess) e = cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  if (e == cudaSuccess) e = cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  if (e == cudaSuccess) { saxpy<<<(n + 255) / 256, 256>>>(n, 2.0f, dx, dy); e = cudaGetLastError(); }
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  std::vector<float> out(n, -1.0f);
  if (e == cudaSuccess) e = cudaMemcpy(out.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost);
  long bad = 0;
  for (int i = 0; i < n; ++i) if (std::fabs(out[i] - (2.0f * x[i] + y[i])) > 1e-4f) ++bad;
  std::printf("{\"runtime\": %d, \"driver\": %d, \"device\": \"%s\", \"cc\": \"%d.%d\", \"error\": \"%s\", "
              "\"mismatches\": %ld, \"ok\": %s}\n", rt, drv, prop.name, prop.major, prop.minor, cudaGetErrorString(e),
              bad, (e == cudaSuccess && bad == 0) ? "true" : "false");
  return (e == cudaSuccess && bad == 0) ? 0 : 1;
}
