#pragma once
// Error checking for CUDA runtime, cuBLAS and cuSPARSE calls (cuCollections' error.hpp idiom).
// Only included by translation units of the CUDA backend.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusparse.h>

#include "check.h"

namespace sparsekern::detail {

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t st, const char* call, const char* file, int line);
[[noreturn]] void throw_cusparse_error(cusparseStatus_t st, const char* call, const char* file, int line);

/// RAII: makes `device` current for the scope and restores the previous device after, so a call
/// on cuda:1 leaves the caller's current device as it found it.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

/// Throws BackendUnavailable unless a CUDA driver and device `device` are present.
void require_cuda_device(int device);

}  // namespace sparsekern::detail

#define SK_CUDA_TRY(call)                                                              \
  do {                                                                                 \
    cudaError_t sk_err_ = (call);                                                      \
    if (sk_err_ != cudaSuccess)                                                        \
      ::sparsekern::detail::throw_cuda_error(sk_err_, #call, __FILE__, __LINE__);      \
  } while (0)

/// Checks the launch of the kernel just issued (configuration errors) without synchronising.
#define SK_CUDA_CHECK_LAUNCH() SK_CUDA_TRY(cudaGetLastError())

#define SK_CUBLAS_TRY(call)                                                            \
  do {                                                                                 \
    cublasStatus_t sk_st_ = (call);                                                    \
    if (sk_st_ != CUBLAS_STATUS_SUCCESS)                                               \
      ::sparsekern::detail::throw_cublas_error(sk_st_, #call, __FILE__, __LINE__);     \
  } while (0)

#define SK_CUSPARSE_TRY(call)                                                          \
  do {                                                                                 \
    cusparseStatus_t sk_st_ = (call);                                                  \
    if (sk_st_ != CUSPARSE_STATUS_SUCCESS)                                             \
      ::sparsekern::detail::throw_cusparse_error(sk_st_, #call, __FILE__, __LINE__);   \
  } while (0)
