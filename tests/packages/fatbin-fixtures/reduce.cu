// A second translation unit, so a linked library holds more than one fatbin.
#include <cuda_runtime.h>

__global__ void block_sum(const float* x, float* out, int n) {
  __shared__ float buf[256];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  buf[threadIdx.x] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = buf[0];
}

extern "C" int slimwheel_block_sum(const float* x, float* out, int n) {
  block_sum<<<(n + 255) / 256, 256>>>(x, out, n);
  return static_cast<int>(cudaGetLastError());
}
