// Every instantiation compiled by nvcc for the plan's architectures (the fatbin carries all of them).
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "topk.cuh"
#include "topk.h"

namespace topk {
namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    cudaGetLastError();
    throw std::runtime_error(std::string("CUDA error in ") + what + ": " + cudaGetErrorName(err) + ": " +
                             cudaGetErrorString(err));
  }
}

template <class T>
const void* kernel(int K) {
  switch (K) {
    case 32: return reinterpret_cast<const void*>(&select<T, 32>);
    case 64: return reinterpret_cast<const void*>(&select<T, 64>);
    case 128: return reinterpret_cast<const void*>(&select<T, 128>);
    case 256: return reinterpret_cast<const void*>(&select<T, 256>);
    case 512: return reinterpret_cast<const void*>(&select<T, 512>);
    case 1024: return reinterpret_cast<const void*>(&select<T, 1024>);
    case 2048: return reinterpret_cast<const void*>(&select<T, 2048>);
  }
  throw std::invalid_argument("no top-k kernel for K=" + std::to_string(K));
}

const void* kernel(Dtype dtype, int K) { return dtype == Dtype::f32 ? kernel<float>(K) : kernel<double>(K); }

}  // namespace

void prepare(Dtype dtype, int K) {
  cudaFuncAttributes attr{};
  // With lazy loading this is what loads the kernel's module.
  check(cudaFuncGetAttributes(&attr, kernel(dtype, K)), "cudaFuncGetAttributes");
}

void launch(Dtype dtype, int K, const void* x, int rows, int n, void* values, int* indices, void* stream) {
  void* args[] = {&x, &n, &values, &indices};
  check(cudaLaunchKernel(kernel(dtype, K), dim3(rows), dim3(kThreads), args, 0, static_cast<cudaStream_t>(stream)),
        "cudaLaunchKernel");
}

std::string describe() { return "precompiled"; }

}  // namespace topk
