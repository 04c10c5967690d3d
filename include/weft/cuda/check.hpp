/// @file
/// Errors of the CUDA runtime, cuBLAS and cuDNN as weft::error: what was being done, the
/// library's name for the error and its sentence. Running out of device memory is
/// resource_exhausted, as the CPU allocator's is; every other failure is internal, or
/// unavailable-as-not_found when there is no driver or device. Host code: compiled by any
/// C++ compiler with the CUDA toolkit's headers on the include path (never the DSL's Hana
/// headers by nvcc: weft/cuda/ is apart, DESIGN.md §2).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <weft/core/error.hpp>

namespace weft::cuda {

/// Nothing for cudaSuccess, else an error naming `what` and CUDA's error (resource_exhausted
/// for out of memory, not_found for no device or driver, internal otherwise).
inline void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();  // clears a sticky-less error so the next call does not see it
  const error_code code = e == cudaErrorMemoryAllocation ? error_code::resource_exhausted
                          : e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ? error_code::not_found
                                                                                       : error_code::internal;
  fail(code, what, ": ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ")");
}

/// Nothing for success, else an error naming `what` and cuBLAS's status.
inline void check(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  fail(s == CUBLAS_STATUS_ALLOC_FAILED ? error_code::resource_exhausted : error_code::internal, what, ": ",
       cublasGetStatusName(s), " (", cublasGetStatusString(s), ")");
}

/// Nothing for success, else an error naming `what` and cuDNN's status.
inline void check(cudnnStatus_t s, const char* what) {
  if (s == CUDNN_STATUS_SUCCESS) return;
  fail(s == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED || s == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED ? error_code::resource_exhausted : error_code::internal, what, ": ",
       cudnnGetErrorString(s));
}

}  // namespace weft::cuda
