# Kernel levels and Eigen's BLAS backend, for every target of the project.
#
# QUANT_KERNEL_LEVELS: the instruction-set levels core/kernels builds
# (x86-64-v2, -v3, -v4 on x86-64; the compiler's default elsewhere).
#
# Every translation unit compiles with EIGEN_USE_BLAS, so Eigen hands its
# large products (GEMM, GEMV, SYRK, TRSM, ...) to BLAS routines, and with
# those routines renamed to quant_blas_* (core/kernels/blas_entry.cc defines
# them and forwards to the current level's kernels). The same definitions
# must reach every TU that includes Eigen: a TU without them would
# instantiate Eigen's products differently under the same symbol names.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(QUANT_KERNEL_LEVELS v2 v3 v4)
else()
  set(QUANT_KERNEL_LEVELS baseline)
endif()

set(QUANT_BLAS_RENAMES)
foreach(prefix s d)
  foreach(routine gemm gemv syrk symm symv trsm trmm axpy trmv)
    list(APPEND QUANT_BLAS_RENAMES
         "${prefix}${routine}_=quant_blas_${prefix}${routine}")
  endforeach()
endforeach()
add_compile_definitions(EIGEN_USE_BLAS ${QUANT_BLAS_RENAMES})
