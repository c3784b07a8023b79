"""torch.ops.torch_op_stable.axpby(x, y, alpha, beta) -> alpha * x + beta * y (float32, CUDA), through the LibTorch
stable ABI: the wheel serves every torch from the version its Requires-Dist names on."""

from pathlib import Path

import torch

torch.ops.load_library(str(Path(__file__).with_name("_C.so")))


def axpby(x: torch.Tensor, y: torch.Tensor, alpha: float = 1.0, beta: float = 1.0) -> torch.Tensor:
    return torch.ops.torch_op_stable.axpby(x, y, alpha, beta)
