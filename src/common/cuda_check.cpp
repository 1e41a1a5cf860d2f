#include "cuda_check.h"

#include <atomic>

namespace sparsekern::detail {

void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  // Clear the (non-sticky) error so that later calls in this process do not see it again.
  (void)cudaGetLastError();
  throw CudaError(concat("CUDA error ", cudaGetErrorName(err), " (", cudaGetErrorString(err),
                         ") in ", call, " at ", file, ":", line));
}

void throw_cublas_error(cublasStatus_t st, const char* call, const char* file, int line) {
  throw CudaError(concat("cuBLAS error ", cublasGetStatusName(st), " (", cublasGetStatusString(st),
                         ") in ", call, " at ", file, ":", line));
}

void throw_cusparse_error(cusparseStatus_t st, const char* call, const char* file, int line) {
  throw CudaError(concat("cuSPARSE error ", cusparseGetErrorName(st), " (",
                         cusparseGetErrorString(st), ") in ", call, " at ", file, ":", line));
}

DeviceGuard::DeviceGuard(int device) {
  SK_CUDA_TRY(cudaGetDevice(&previous_));
  // cudaGetDevice answers 0 on a thread that has no current context yet (torch's autograd
  // threads, a fresh std::thread), and runtime calls bind one lazily, but driver calls such as
  // cuTensorMapEncodeTiled do not: they fail with CUDA_ERROR_INVALID_CONTEXT. So a thread's first
  // guard always calls cudaSetDevice, which makes the device's primary context current.
  static thread_local bool context_bound = false;
  if (previous_ != device || !context_bound) SK_CUDA_TRY(cudaSetDevice(device));
  context_bound = true;
}

DeviceGuard::~DeviceGuard() {
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current != previous_ && previous_ >= 0)
    (void)cudaSetDevice(previous_);
}

void require_cuda_device(int device) {
  // Devices do not appear at run time, so a positive count is cached: this runs on every op.
  static std::atomic<int> cached_count{0};
  int count = cached_count.load(std::memory_order_relaxed);
  if (device >= 0 && device < count) return;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    throw BackendUnavailable(concat("CUDA operand given but no usable CUDA driver/device: ",
                                    cudaGetErrorName(err), " (", cudaGetErrorString(err), ")"));
  }
  cached_count.store(count, std::memory_order_relaxed);
  if (device < 0 || device >= count)
    throw InvalidArgument(concat("CUDA device index ", device, " out of range: ", count,
                                 " device(s) visible"));
}

}  // namespace sparsekern::detail
