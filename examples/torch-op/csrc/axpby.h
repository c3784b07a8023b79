#pragma once
#include <cstdint>

// 0 on success, else a cudaError_t (the launch's own error; execution errors surface at the next sync).
int torch_op_axpby(const float* x, const float* y, float* out, int64_t n, float alpha, float beta, void* stream);
const char* torch_op_error_string(int code);
