// torch.ops.torch_op_stable.axpby through the LibTorch stable ABI only: torch/csrc/stable and the C shim, with
// TORCH_TARGET_VERSION (CMakeLists.txt) naming the oldest torch the wheel serves. Nothing here takes a C++ symbol
// of libtorch, so the wheel loads in every torch from that version on.
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include "axpby.h"

namespace {

using torch::stable::Tensor;

Tensor axpby(const Tensor& x, const Tensor& y, double alpha, double beta) {
  STD_TORCH_CHECK(x.is_cuda() && y.is_cuda(), "axpby: x and y must be CUDA tensors");
  STD_TORCH_CHECK(x.scalar_type() == torch::headeronly::ScalarType::Float &&
                      y.scalar_type() == torch::headeronly::ScalarType::Float,
                  "axpby: x and y must be float32");
  STD_TORCH_CHECK(x.numel() == y.numel(), "axpby: x and y must have as many elements");
  STD_TORCH_CHECK(x.get_device_index() == y.get_device_index(), "axpby: x and y must be on one device");
  Tensor xc = torch::stable::contiguous(x);
  Tensor yc = torch::stable::contiguous(y);
  Tensor out = torch::stable::empty_like(xc);
  torch::stable::accelerator::DeviceGuard guard(xc.get_device_index());
  void* stream = nullptr;  // the C shim's CUDA entry point (USE_CUDA): a stable Stream holds only an id
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_current_cuda_stream(xc.get_device_index(), &stream));
  int err = torch_op_axpby(static_cast<const float*>(xc.data_ptr()), static_cast<const float*>(yc.data_ptr()),
                           static_cast<float*>(out.data_ptr()), xc.numel(), static_cast<float>(alpha),
                           static_cast<float>(beta), stream);
  STD_TORCH_CHECK(err == 0, "axpby: kernel launch failed: ", torch_op_error_string(err));
  return out;
}

}  // namespace

STABLE_TORCH_LIBRARY(torch_op_stable, m) { m.def("axpby(Tensor x, Tensor y, float alpha, float beta) -> Tensor"); }

STABLE_TORCH_LIBRARY_IMPL(torch_op_stable, CUDA, m) { m.impl("axpby", TORCH_BOX(&axpby)); }
