// Where does a runtime-loaded CUDA module's GPU memory go? (issue 15: the NVRTC wheel used 2 MiB more after its first
// call than the precompiled one.) One scenario per process (device memory, once taken, is not given back), each printing
// one JSON line of cuMemGetInfo readings (MiB in use on the device). Built and run by gpu/module_mem_probe.sh:
//
//   nvcc -arch=sm_90 -o probe module_mem_probe.cu -lcuda              (the kernels below, registered by the runtime)
//   nvcc -arch=sm_90 -cubin -DPROBE_CUBIN -DPROBE_SMALL_ONLY -o small.cubin module_mem_probe.cu  (small_kernel only)
//   nvcc -arch=sm_90 -cubin -DPROBE_CUBIN -o big.cubin module_mem_probe.cu     (every kernel: about 1 MiB of code)
//   ./probe SCENARIO [small.cubin|big.cubin]
//
// Scenarios: ctx, registered_small, registered_big, module (one load + launch), modules20 (the same cubin 20 times),
// library_driver (cuLibraryLoadData), library_runtime (cudaLibraryLoadData), registered_then_module, load_only (load
// a cubin and make one function resident, no launch). -DPROBE_GLOBAL gives small_kernel 8 bytes of module data.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#ifdef PROBE_GLOBAL
// Module data of its own (8 bytes, as NVRTC emits for two namespace-scope constexpr ints): does it cost device memory?
__device__ int probe_global[2];
extern "C" __global__ void small_kernel(float* x) { x[threadIdx.x] += static_cast<float>(probe_global[threadIdx.x & 1]); }
#else
extern "C" __global__ void small_kernel(float* x) { x[threadIdx.x] += 1.0f; }
#endif

#ifndef PROBE_SMALL_ONLY
// Code-heavy kernels: a fully unrolled chain of dependent operations, about 1 MiB of sm_90 code for the set.
// (Float multiply-adds are not reassociated, so each stays an instruction: 8,000 per kernel, about 128 KiB of code.)
#define PROBE_STEP v = v * 1.0001f + static_cast<float>(Salt) + w; w = w * 0.9999f - v;
#define PROBE_X10 PROBE_STEP PROBE_STEP PROBE_STEP PROBE_STEP PROBE_STEP PROBE_STEP PROBE_STEP PROBE_STEP PROBE_STEP PROBE_STEP
#define PROBE_X100 PROBE_X10 PROBE_X10 PROBE_X10 PROBE_X10 PROBE_X10 PROBE_X10 PROBE_X10 PROBE_X10 PROBE_X10 PROBE_X10
#define PROBE_X1000 PROBE_X100 PROBE_X100 PROBE_X100 PROBE_X100 PROBE_X100 PROBE_X100 PROBE_X100 PROBE_X100 PROBE_X100 PROBE_X100
template <int Salt>
__global__ void big_kernel(float* x) {
  float v = x[threadIdx.x], w = x[threadIdx.x + 32];
  PROBE_X1000 PROBE_X1000 PROBE_X1000 PROBE_X1000
  x[threadIdx.x] = v + w;
}
template __global__ void big_kernel<1>(float*);
template __global__ void big_kernel<2>(float*);
template __global__ void big_kernel<3>(float*);
template __global__ void big_kernel<4>(float*);
template __global__ void big_kernel<5>(float*);
template __global__ void big_kernel<6>(float*);
template __global__ void big_kernel<7>(float*);
#endif

#ifndef PROBE_CUBIN
static double used_mib() {
  size_t free_b = 0, total_b = 0;
  if (cuMemGetInfo(&free_b, &total_b) != CUDA_SUCCESS) return -1;
  return static_cast<double>(total_b - free_b) / (1024.0 * 1024.0);
}

static std::vector<char> read_file(const char* path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "cannot read %s\n", path);
    std::exit(2);
  }
  return std::vector<char>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

#define CHECK_DRV(x)                                                 \
  do {                                                               \
    CUresult rc_ = (x);                                              \
    if (rc_ != CUDA_SUCCESS) {                                       \
      std::fprintf(stderr, "%s failed: %d\n", #x, static_cast<int>(rc_)); \
      std::exit(3);                                                  \
    }                                                                \
  } while (0)
#define CHECK_RT(x)                                                  \
  do {                                                               \
    cudaError_t rc_ = (x);                                           \
    if (rc_ != cudaSuccess) {                                        \
      std::fprintf(stderr, "%s failed: %s\n", #x, cudaGetErrorString(rc_)); \
      std::exit(3);                                                  \
    }                                                                \
  } while (0)

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: probe SCENARIO [CUBIN]\n");
    return 2;
  }
  std::string s = argv[1];
  std::vector<std::pair<std::string, double>> marks;
  CHECK_RT(cudaFree(nullptr));  // the runtime's primary context, as in an extension module
  float* buf = nullptr;
  CHECK_RT(cudaMalloc(&buf, 1024 * sizeof(float)));
  marks.emplace_back("context", used_mib());

  auto launch_drv = [&](CUfunction fn) {
    void* args[] = {&buf};
    CHECK_DRV(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr));
    CHECK_RT(cudaDeviceSynchronize());
  };
  // cuModuleLoadData, then one function of it; `mark` (if any) reads the memory in between.
  auto module_function = [&](const std::vector<char>& image, const char* name, const char* mark) {
    CUmodule m;
    CHECK_DRV(cuModuleLoadData(&m, image.data()));
    if (mark) marks.emplace_back(mark, used_mib());
    CUfunction fn;
    CHECK_DRV(cuModuleGetFunction(&fn, m, name));
    return fn;
  };
  auto load_module = [&](const std::vector<char>& image, const char* name) {
    launch_drv(module_function(image, name, "after_load"));
    marks.emplace_back("after_launch", used_mib());
  };
  const char* entry = (argc > 3) ? argv[3] : "small_kernel";

  if (s == "ctx") {
  } else if (s == "registered_small" || s == "registered_then_module") {
    small_kernel<<<1, 32>>>(buf);
    CHECK_RT(cudaDeviceSynchronize());
    marks.emplace_back("after_registered_launch", used_mib());
    if (s == "registered_then_module") load_module(read_file(argv[2]), entry);
  } else if (s == "registered_big") {
    big_kernel<1><<<1, 32>>>(buf);
    big_kernel<2><<<1, 32>>>(buf);
    big_kernel<3><<<1, 32>>>(buf);
    big_kernel<4><<<1, 32>>>(buf);
    CHECK_RT(cudaDeviceSynchronize());
    marks.emplace_back("after_registered_launch", used_mib());
  } else if (s == "module") {
    load_module(read_file(argv[2]), entry);
  } else if (s == "load_only") {
    // Load a cubin and take one function (argv[3]) without launching it: for cubins whose kernels take other
    // arguments (the topk NVRTC cubins). cuFuncGetAttribute makes a lazily loaded function resident.
    CUfunction fn = module_function(read_file(argv[2]), entry, nullptr);
    int regs = 0;
    CHECK_DRV(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn));
    marks.emplace_back("after_load_and_function", used_mib());
  } else if (s == "modules20") {
    std::vector<char> image = read_file(argv[2]);
    for (int i = 0; i < 20; ++i) {
      launch_drv(module_function(image, entry, nullptr));
      marks.emplace_back("after_module_" + std::to_string(i + 1), used_mib());
    }
  } else if (s == "library_driver") {
    std::vector<char> image = read_file(argv[2]);
    CUlibrary lib;
    CHECK_DRV(cuLibraryLoadData(&lib, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    marks.emplace_back("after_load", used_mib());
    CUkernel k;
    CHECK_DRV(cuLibraryGetKernel(&k, lib, entry));
    CUfunction fn;
    CHECK_DRV(cuKernelGetFunction(&fn, k));
    launch_drv(fn);
    marks.emplace_back("after_launch", used_mib());
  } else if (s == "library_runtime") {
    std::vector<char> image = read_file(argv[2]);
    cudaLibrary_t lib;
    CHECK_RT(cudaLibraryLoadData(&lib, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    marks.emplace_back("after_load", used_mib());
    cudaKernel_t k;
    CHECK_RT(cudaLibraryGetKernel(&k, lib, entry));
    void* args[] = {&buf};
    CHECK_RT(cudaLaunchKernel(reinterpret_cast<const void*>(k), dim3(1), dim3(32), args, 0, nullptr));
    CHECK_RT(cudaDeviceSynchronize());
    marks.emplace_back("after_launch", used_mib());
  } else {
    std::fprintf(stderr, "unknown scenario %s\n", s.c_str());
    return 2;
  }
  std::printf("{\"scenario\": \"%s\", \"image\": \"%s\", \"mib\": {", s.c_str(), argc > 2 ? argv[2] : "");
  for (size_t i = 0; i < marks.size(); ++i)
    std::printf("%s\"%s\": %.3f", i ? ", " : "", marks[i].first.c_str(), marks[i].second);
  std::printf("}}\n");
  return 0;
}
#endif
