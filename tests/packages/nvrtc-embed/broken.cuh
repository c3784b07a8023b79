// Does not compile: the runtime must report NVRTC's log.
template <int K>
__global__ void broken(int* out) { out[0] = K + undeclared_name; }
