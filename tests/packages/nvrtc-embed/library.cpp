// A shared library whose only use of the embedded sources is through bundle(): --gc-sections must keep them.
#include "lib_kernels.h"

extern "C" __attribute__((visibility("default"))) unsigned embedded_files() { return lib_kernels::bundle().count; }
