"""torch.ops.torch_op_classic.axpby(x, y, alpha, beta) -> alpha * x + beta * y (float32, CUDA), through torch's
classic C++ API: the wheel serves the torch minor release it was built against."""

from pathlib import Path

import torch

torch.ops.load_library(str(Path(__file__).parent.glob("_C*.so").__next__()))


def axpby(x: torch.Tensor, y: torch.Tensor, alpha: float = 1.0, beta: float = 1.0) -> torch.Tensor:
    return torch.ops.torch_op_classic.axpby(x, y, alpha, beta)
