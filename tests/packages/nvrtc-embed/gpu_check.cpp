// One process of the GPU check of slimwheel/nvrtc.hpp (tests/gpu/nvrtc_cache_check.py runs several): compiles or loads
// topk::select<float, K> through the runtime (disk cache as SLIMWHEEL_NVRTC_CACHE says), runs it on a small matrix with
// ties, compares with a CPU sort, and prints one line of JSON. Usage: gpu_check <libnvrtc.so.13> <K>.
// Only the driver API is used (through dlsym), as an extension without cudart would.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels.h"

namespace {

template <class F>
F driver(const char* name) {
  static void* cuda = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  void* f = cuda ? ::dlsym(cuda, name) : nullptr;
  if (!f) {
    std::printf("{\"error\": \"no %s\"}\n", name);
    std::exit(1);
  }
  return reinterpret_cast<F>(f);
}

void check(int rc, const char* what) {
  if (rc != 0) {
    std::printf("{\"error\": \"%s failed: %d\"}\n", what, rc);
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || !::dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL)) return 2;
  const int K = std::atoi(argv[2]);
  const int rows = 64, n = 3000;
  std::mt19937 rng(15);
  std::vector<float> x(static_cast<size_t>(rows) * n);
  for (auto& v : x) v = static_cast<float>(static_cast<int>(rng() % 200)) / 8.0f;  // many ties

  // The context first, as an extension's CUDA runtime makes it before any kernel: ready_ms is then the kernel's cost
  // alone (cache or compile, and load), not cuInit's and the context's.
  auto c0 = std::chrono::steady_clock::now();
  void* ctx = nullptr;
  check(driver<int (*)(unsigned)>("cuInit")(0), "cuInit");
  check(driver<int (*)(void**, int)>("cuDevicePrimaryCtxRetain")(&ctx, 0), "cuDevicePrimaryCtxRetain");
  check(driver<int (*)(void*)>("cuCtxSetCurrent")(ctx), "cuCtxSetCurrent");
  double context_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - c0).count();

  auto& rt = slimwheel::nvrtc::Runtime::instance();
  auto t0 = std::chrono::steady_clock::now();
  slimwheel::nvrtc::Kernel k;
  try {
    k = rt.kernel(kernels::bundle(), "topk.cuh", "topk::select<float, " + std::to_string(K) + ">");
  } catch (const slimwheel::nvrtc::Error& e) {
    std::printf("{\"error\": \"runtime: %s\"}\n", e.what());
    return 1;
  }
  double ready_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  using Ptr = unsigned long long;
  auto mem_alloc = driver<int (*)(Ptr*, size_t)>("cuMemAlloc_v2");
  auto htod = driver<int (*)(Ptr, const void*, size_t)>("cuMemcpyHtoD_v2");
  auto dtoh = driver<int (*)(void*, Ptr, size_t)>("cuMemcpyDtoH_v2");
  auto sync = driver<int (*)()>("cuCtxSynchronize");
  Ptr dx = 0, dv = 0, di = 0;
  check(mem_alloc(&dx, x.size() * 4), "cuMemAlloc");
  check(mem_alloc(&dv, static_cast<size_t>(rows) * K * 4), "cuMemAlloc");
  check(mem_alloc(&di, static_cast<size_t>(rows) * K * 4), "cuMemAlloc");
  check(htod(dx, x.data(), x.size() * 4), "cuMemcpyHtoD");
  int nn = n;
  void* args[] = {&dx, &nn, &dv, &di};
  rt.launch(k, rows, 256, 0, nullptr, args);
  check(sync(), "cuCtxSynchronize");
  std::vector<float> values(static_cast<size_t>(rows) * K);
  std::vector<int> indices(values.size());
  check(dtoh(values.data(), dv, values.size() * 4), "cuMemcpyDtoH");
  check(dtoh(indices.data(), di, indices.size() * 4), "cuMemcpyDtoH");

  bool correct = true;
  std::vector<int> order(n);
  for (int r = 0; r < rows && correct; ++r) {
    const float* row = &x[static_cast<size_t>(r) * n];
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return row[a] < row[b]; });
    for (int i = 0; i < K && i < n; ++i)
      correct = correct && indices[static_cast<size_t>(r) * K + i] == order[i] &&
                values[static_cast<size_t>(r) * K + i] == row[order[i]];
  }
  const auto& cache = rt.cache();
  std::printf("{\"K\": %d, \"from_cache\": %s, \"kind\": \"%s\", \"arch\": %d, \"context_ms\": %.3f, "
              "\"ready_ms\": %.3f, \"correct\": %s, "
              "\"cache_enabled\": %s, \"cache\": \"%s\"}\n",
              K, k.from_cache ? "true" : "false", k.kind == slimwheel::nvrtc::ImageKind::cubin ? "cubin" : "ptx",
              k.arch, context_ms, ready_ms, correct ? "true" : "false", cache.enabled() ? "true" : "false",
              (cache.enabled() ? cache.dir() : cache.disabled_reason()).c_str());
  return correct ? 0 : 1;
}
