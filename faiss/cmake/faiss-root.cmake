# Copied by faiss/CMakeLists.txt over the top-level CMakeLists.txt of the build's private copy of the faiss tree.
# It replaces faiss 1.7.3's own top level for three reasons (faiss/README.md, "Changes"):
# - C++17 for C++ and CUDA: CCCL 3 (CUDA 13's Thrust/CUB) rejects faiss's C++11;
# - only the library, its GPU part and the SWIG module (no demos, benchmarks, tutorials or C++ tests to configure);
# - it keeps project(faiss) at the root of the tree, so faiss's own CMake files (which use PROJECT_SOURCE_DIR and
#   faiss_SOURCE_DIR for include paths and header lists) see the tree they expect.
cmake_minimum_required(VERSION 3.24)

project(faiss
  VERSION 1.7.3
  DESCRIPTION "A library for efficient similarity search and clustering of dense vectors."
  LANGUAGES CXX CUDA)
include(GNUInstallDirs)

set(CMAKE_CXX_STANDARD 17)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
# GCC 13's libstdc++ no longer pulls <cstdint> in through other headers, and faiss 1.7.3 uses uint8_t and friends
# without including it (IndexBinary.h, seen on the GPU machine's GCC 13): force-include it, host and CUDA code alike,
# with GCC 13 and later only, so that builds with older compilers keep their flags (and their compiler caches).
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 13)
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:SHELL:-include cstdint>" "$<$<COMPILE_LANGUAGE:CUDA>:--pre-include=cstdint>")
endif()
list(APPEND CMAKE_MODULE_PATH "${PROJECT_SOURCE_DIR}/cmake")

# faiss's options, fixed: the wheel holds the GPU library and the Python module, nothing else.
set(FAISS_ENABLE_GPU ON)
set(FAISS_ENABLE_PYTHON ON)
set(FAISS_ENABLE_C_API OFF)
set(CMAKE_CUDA_HOST_COMPILER "${CMAKE_CXX_COMPILER}")

add_subdirectory(faiss)
add_subdirectory(faiss/gpu)
add_subdirectory(faiss/python)
