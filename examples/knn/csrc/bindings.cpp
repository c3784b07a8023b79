// Python binding of the knn kernels (nanobind). Host-only code: nvcc never sees nanobind.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <memory>

#include "knn.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using Matrix = nb::ndarray<const float, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

template <class T>
nb::ndarray<nb::numpy, T, nb::ndim<2>> to_numpy(std::unique_ptr<T[]> data, size_t rows, size_t cols) {
  T* raw = data.release();
  nb::capsule owner(raw, [](void* p) noexcept { delete[] static_cast<T*>(p); });
  return nb::ndarray<nb::numpy, T, nb::ndim<2>>(raw, {rows, cols}, owner);
}

nb::tuple search(Matrix database, Matrix queries, int k, int device) {
  const size_t n = database.shape(0), d = database.shape(1), m = queries.shape(0);
  if (queries.shape(1) != d)
    throw nb::value_error("queries and database must have the same number of columns (dimensions)");
  if (n == 0 || d == 0) throw nb::value_error("the database must have at least one row and one column");
  if (k < 1 || k > knn::kMaxK || static_cast<size_t>(k) > n)
    throw nb::value_error(("k must be between 1 and min(len(database), " + std::to_string(knn::kMaxK) + ")").c_str());
  auto dist = std::make_unique<float[]>(m * k);
  auto idx = std::make_unique<int64_t[]>(m * k);
  {
    nb::gil_scoped_release unlocked;
    knn::search(database.data(), static_cast<int64_t>(n), queries.data(), static_cast<int64_t>(m),
                static_cast<int64_t>(d), k, dist.get(), idx.get(), device);
  }
  return nb::make_tuple(to_numpy(std::move(dist), m, k), to_numpy(std::move(idx), m, k));
}

}  // namespace

NB_MODULE(_knn, m) {
  m.doc() = "Exact k-nearest-neighbour search on NVIDIA GPUs (cuBLAS + top-k kernels).";
  m.attr("MAX_K") = knn::kMaxK;
  m.def("device_count", &knn::device_count, "Number of CUDA devices; 0 without a GPU or a usable driver.");
  m.def("runtime_info", &knn::runtime_info, "CUDA runtime and driver versions as text.");
  m.def("search", &search, "database"_a, "queries"_a, "k"_a, "device"_a = 0,
        "Squared L2 distances and indices (float32, int64; shape (len(queries), k)) of the k nearest database rows.\n"
        "Raises RuntimeError with the CUDA error text when the GPU cannot be used.");
}
