// CUDA backend of square_matmul's copy-back: the product panel (in the workspace) over its rows of
// X, on the caller's stream. Without a bias this is one cudaMemcpy2DAsync (the copy engine's
// pitched copy, at copy bandwidth); with a bias, a vectorised kernel that adds it on the way
// (same traffic as the copy: one read of the panel, one write of X, the bias stays in cache).

#include "rows_cuda.cuh"
#include "inplace_internal.h"

namespace sparsekern::inplace::detail {
namespace {

constexpr int kCopyThreads = 256;

/// x[r, :] = panel[r, :] + bias, V elements per thread step when `vectorised` (n a multiple of V
/// and all three pointers/pitches 16-byte aligned), one element otherwise.
template <typename T>
__global__ void __launch_bounds__(kCopyThreads)
add_bias_rows_kernel(T* x, std::int64_t row_stride, const T* panel, const T* bias, std::int64_t rows,
                     std::int64_t n, bool vectorised) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  const int step = vectorised ? V : 1;
  const std::int64_t per_row = n / step, total = rows * per_row;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / per_row, c = (i % per_row) * step;
    if (vectorised) {
      A v[V], b[V];
      load_vec(panel + r * n, c, n, true, v, A(0));
      load_vec_ro(bias, c, n, true, b, A(0));
#pragma unroll
      for (int k = 0; k < V; ++k) v[k] += b[k];
      store_vec(x + r * row_stride, c, n, true, v);
    } else {
      x[r * row_stride + c] = from_acc<T>(to_acc(panel[r * n + c]) + to_acc(bias[c]));
    }
  }
}

}  // namespace

void copy_panel_cuda(const SquareMatmulParams& p, std::int64_t row0, std::int64_t rows, const void* panel,
                     Stream stream_ptr) {
  const std::size_t elem = dtype_size(p.dtype);
  const std::int64_t n = p.x.cols;
  const std::int64_t row_stride = rows > 1 ? p.x.row_stride : n;
  void* dst = static_cast<char*>(p.x.data) + row0 * p.x.row_stride * static_cast<std::int64_t>(elem);
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  sparsekern::detail::DeviceGuard guard(p.device.index);
  if (p.bias == nullptr) {
    SK_CUDA_TRY(cudaMemcpy2DAsync(dst, row_stride * elem, panel, n * elem, n * elem, rows,
                                  cudaMemcpyDeviceToDevice, stream));
    return;
  }
  cuda_dtype_switch(p.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr int V = kVec<T>;
    const auto a16 = [](const void* q) { return reinterpret_cast<std::uintptr_t>(q) % 16 == 0; };
    const bool vectorised = n % V == 0 && row_stride % V == 0 && a16(dst) && a16(panel) && a16(p.bias);
    const std::int64_t work = rows * (vectorised ? n / V : n);
    add_bias_rows_kernel<T><<<grid_for(work, kCopyThreads), kCopyThreads, 0, stream>>>(
        static_cast<T*>(dst), row_stride, static_cast<const T*>(panel), static_cast<const T*>(p.bias), rows, n,
        vectorised);
  });
  SK_CUDA_CHECK_LAUNCH();
}

}  // namespace sparsekern::inplace::detail
