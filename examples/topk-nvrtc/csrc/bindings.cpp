// Python binding (nanobind), the same for both builds. Host-only code.
#include <cuda_runtime_api.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "topk.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    cudaGetLastError();
    throw std::runtime_error(std::string("CUDA error in ") + what + ": " + cudaGetErrorName(err) + ": " +
                             cudaGetErrorString(err));
  }
}

class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) { check(cudaMalloc(&ptr_, bytes), "cudaMalloc"); }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
};

using Matrix = nb::ndarray<nb::ndim<2>, nb::c_contig, nb::device::cpu>;

topk::Dtype dtype_of(const Matrix& x) {
  if (x.dtype() == nb::dtype<float>()) return topk::Dtype::f32;
  if (x.dtype() == nb::dtype<double>()) return topk::Dtype::f64;
  throw nb::type_error("x must be float32 or float64");
}

topk::Dtype dtype_named(const std::string& name) {
  if (name == "float32") return topk::Dtype::f32;
  if (name == "float64") return topk::Dtype::f64;
  throw nb::value_error("dtype must be 'float32' or 'float64'");
}

int checked_bucket(const Matrix& x, int k) {
  if (x.shape(0) == 0 || x.shape(1) == 0) throw nb::value_error("x must have at least one row and one column");
  if (x.shape(0) > 0x7fffffff || x.shape(1) > 0x7fffffff) throw nb::value_error("x is too large");
  int K = topk::bucket(k);
  if (k < 1 || K == 0) throw nb::value_error(("k must be between 1 and " + std::to_string(topk::kMaxK)).c_str());
  return K;
}

template <class T>
nb::ndarray<nb::numpy, T, nb::ndim<2>> to_numpy(std::unique_ptr<T[]> data, size_t rows, size_t cols) {
  T* raw = data.release();
  nb::capsule owner(raw, [](void* p) noexcept { delete[] static_cast<T*>(p); });
  return nb::ndarray<nb::numpy, T, nb::ndim<2>>(raw, {rows, cols}, owner);
}

// The top K (the instantiation serving k) of each row; Python keeps the first k columns.
nb::tuple select_rows(Matrix x, int k) {
  const int K = checked_bucket(x, k);
  const topk::Dtype dt = dtype_of(x);
  const size_t rows = x.shape(0), n = x.shape(1), esize = dt == topk::Dtype::f32 ? 4 : 8;
  auto idx = std::make_unique<int32_t[]>(rows * K);
  nb::object values;
  std::unique_ptr<float[]> vf;
  std::unique_ptr<double[]> vd;
  if (dt == topk::Dtype::f32) vf = std::make_unique<float[]>(rows * K);
  else vd = std::make_unique<double[]>(rows * K);
  void* host_values = dt == topk::Dtype::f32 ? static_cast<void*>(vf.get()) : static_cast<void*>(vd.get());
  {
    nb::gil_scoped_release unlocked;
    DeviceBuffer dx(rows * n * esize), dv(rows * K * esize), di(rows * K * sizeof(int32_t));
    check(cudaMemcpy(dx.get(), x.data(), rows * n * esize, cudaMemcpyHostToDevice), "cudaMemcpy");
    topk::launch(dt, K, dx.get(), static_cast<int>(rows), static_cast<int>(n), dv.get(),
                 static_cast<int*>(di.get()), nullptr);
    check(cudaGetLastError(), "launch");
    check(cudaMemcpy(host_values, dv.get(), rows * K * esize, cudaMemcpyDeviceToHost), "cudaMemcpy");
    check(cudaMemcpy(idx.get(), di.get(), rows * K * sizeof(int32_t), cudaMemcpyDeviceToHost), "cudaMemcpy");
  }
  if (dt == topk::Dtype::f32) values = nb::cast(to_numpy(std::move(vf), rows, K));
  else values = nb::cast(to_numpy(std::move(vd), rows, K));
  return nb::make_tuple(values, nb::cast(to_numpy(std::move(idx), rows, K)));
}

// Milliseconds per launch on data already on the device (CUDA events around `iters` launches after one warm-up).
double bench(Matrix x, int k, int iters) {
  const int K = checked_bucket(x, k);
  const topk::Dtype dt = dtype_of(x);
  if (iters < 1) throw nb::value_error("iters must be >= 1");
  const size_t rows = x.shape(0), n = x.shape(1), esize = dt == topk::Dtype::f32 ? 4 : 8;
  nb::gil_scoped_release unlocked;
  DeviceBuffer dx(rows * n * esize), dv(rows * K * esize), di(rows * K * sizeof(int32_t));
  check(cudaMemcpy(dx.get(), x.data(), rows * n * esize, cudaMemcpyHostToDevice), "cudaMemcpy");
  auto run = [&] {
    topk::launch(dt, K, dx.get(), static_cast<int>(rows), static_cast<int>(n), dv.get(), static_cast<int*>(di.get()),
                 nullptr);
  };
  run();
  check(cudaDeviceSynchronize(), "warm-up");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  check(cudaEventRecord(start), "cudaEventRecord");
  for (int i = 0; i < iters; ++i) run();
  check(cudaEventRecord(stop), "cudaEventRecord");
  check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / iters;
}

void init(int device) {
  check(cudaSetDevice(device), "cudaSetDevice");
  check(cudaFree(nullptr), "cudaFree");  // creates the primary context
}

}  // namespace

NB_MODULE(_topk, m) {
  m.doc() = "Top-k selection per row on NVIDIA GPUs (templated CUDA kernels).";
  m.attr("MAX_K") = topk::kMaxK;
  m.attr("KS") = std::vector<int>(std::begin(topk::kKs), std::end(topk::kKs));
  m.def("init", &init, "device"_a = 0, "Make `device` current and create its CUDA context.");
  m.def("describe", &topk::describe, "How kernels are provided (precompiled, or NVRTC and its cache).");
  m.def("prepare", [](const std::string& dtype, int K) {
        if (topk::bucket(K) != K) throw nb::value_error("K must be one of KS");
        nb::gil_scoped_release unlocked;
        topk::prepare(dtype_named(dtype), K);
      },
      "dtype"_a, "K"_a, "Load (or compile) the kernel for dtype ('float32'/'float64') and K without running it.");
  m.def("select", &select_rows, "x"_a, "k"_a);
  m.def("bench", &bench, "x"_a, "k"_a, "iters"_a, "Milliseconds per launch, data on the device.");
}
