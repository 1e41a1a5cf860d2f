#pragma once
// The CUDA element type of a DType, as a compile-time type for a generic lambda (the bsr CUDA
// sources' dtype dispatch: the SIMT kernels, the row sums' pass).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <sparsekern/error.h>
#include <sparsekern/types.h>

namespace sparsekern::bsr::detail {

/// Calls f(T{}) with T the device element type of `dtype` (__half, __nv_bfloat16, float, double).
template <typename F>
void with_device_type(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f16: f(__half{}); return;
    case DType::bf16: f(__nv_bfloat16{}); return;
    case DType::f32: f(float{}); return;
    case DType::f64: f(double{}); return;
  }
  throw TypeMismatch("unsupported dtype");
}

}  // namespace sparsekern::bsr::detail
