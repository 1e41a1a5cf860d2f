// Library-wide queries: version, backend availability, dtype names.
#include <sparsekern/types.h>

#if SPARSEKERN_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

#ifndef SPARSEKERN_VERSION_STRING
#error "SPARSEKERN_VERSION_STRING must be defined by the build"
#endif

namespace sparsekern {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f16: return "float16";
    case DType::bf16: return "bfloat16";
    case DType::f32: return "float32";
    case DType::f64: return "float64";
  }
  return "unknown";
}

bool built_with_cuda() { return SPARSEKERN_WITH_CUDA != 0; }

int cuda_device_count() {
#if SPARSEKERN_WITH_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver / no device is an answer (0), not an error
    return 0;
  }
  return count;
#else
  return 0;
#endif
}

const char* version() { return SPARSEKERN_VERSION_STRING; }

}  // namespace sparsekern
