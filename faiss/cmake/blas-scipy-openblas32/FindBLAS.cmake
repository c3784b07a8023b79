# FindBLAS for FAISS_BLAS=scipy-openblas32: faiss's find_package(BLAS) gets the scipy-openblas32 wheel's library.
# CMake's own FindBLAS cannot find it: it probes for sgemm_, and every symbol there carries a scipy_ prefix
# (scipy_sgemm_); faiss/CMakeLists.txt maps faiss's Fortran names onto the prefixed ones (FAISS_SCIPY_OPENBLAS_SYMBOLS).
if(NOT SCIPY_OPENBLAS32_LIBRARY)
  message(FATAL_ERROR "FindBLAS (scipy-openblas32): SCIPY_OPENBLAS32_LIBRARY is not set")
endif()
set(BLAS_FOUND TRUE)
set(BLAS_LIBRARIES "${SCIPY_OPENBLAS32_LIBRARY}")
set(BLAS_LINKER_FLAGS "")
