// torch.ops.torch_op_classic.axpby through the classic C++ API (ATen, c10, TORCH_LIBRARY): what most extensions on
// PyPI use. It takes C++ symbols of libtorch and libc10, whose ABI changes with every minor release of torch, so the
// wheel serves exactly the torch minor it was built against.
#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "axpby.h"

namespace {

at::Tensor axpby(const at::Tensor& x, const at::Tensor& y, double alpha, double beta) {
  TORCH_CHECK(x.is_cuda() && y.is_cuda(), "axpby: x and y must be CUDA tensors");
  TORCH_CHECK(x.scalar_type() == at::kFloat && y.scalar_type() == at::kFloat, "axpby: x and y must be float32");
  TORCH_CHECK(x.numel() == y.numel(), "axpby: x and y must have as many elements");
  TORCH_CHECK(x.get_device() == y.get_device(), "axpby: x and y must be on one device");
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor xc = x.contiguous();
  at::Tensor yc = y.contiguous();
  at::Tensor out = at::empty_like(xc);
  int err = torch_op_axpby(xc.data_ptr<float>(), yc.data_ptr<float>(), out.data_ptr<float>(), xc.numel(),
                           static_cast<float>(alpha), static_cast<float>(beta),
                           at::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == 0, "axpby: kernel launch failed: ", torch_op_error_string(err));
  return out;
}

}  // namespace

TORCH_LIBRARY(torch_op_classic, m) { m.def("axpby(Tensor x, Tensor y, float alpha, float beta) -> Tensor"); }

TORCH_LIBRARY_IMPL(torch_op_classic, CUDA, m) { m.impl("axpby", &axpby); }
