# FindLAPACK for FAISS_BLAS=scipy-openblas32: OpenBLAS carries LAPACK in the same library (see FindBLAS.cmake here).
if(NOT SCIPY_OPENBLAS32_LIBRARY)
  message(FATAL_ERROR "FindLAPACK (scipy-openblas32): SCIPY_OPENBLAS32_LIBRARY is not set")
endif()
set(LAPACK_FOUND TRUE)
set(LAPACK_LIBRARIES "${SCIPY_OPENBLAS32_LIBRARY}")
set(LAPACK_LINKER_FLAGS "")
