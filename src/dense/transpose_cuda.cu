// CUDA transpose (out = inᵀ): 32 × 32 tiles through shared memory, so that both the reads of `in`
// and the writes of `out` are row-contiguous (a warp covers 32 consecutive elements of one row on
// each side); the padded tile row (33) keeps the column reads free of bank conflicts.
#include <algorithm>
#include <cstdint>

#include <cuda_runtime.h>

#include "../common/cuda_check.h"
#include "gemm_internal.h"

namespace sparsekern::dense::detail {
namespace {

constexpr int kTile = 32;
constexpr int kPass = 8;  // rows of the tile per thread row: 256 threads per block

template <typename T>
__global__ void __launch_bounds__(kTile * kPass)
    transpose_kernel(const T* __restrict__ in, T* __restrict__ out, long long rows, long long cols,
                     long long ldi, long long ldo, long long row_tiles) {
  __shared__ T tile[kTile][kTile + 1];
  const long long c0 = static_cast<long long>(blockIdx.x) * kTile;
  for (long long tr = blockIdx.y; tr < row_tiles; tr += gridDim.y) {  // grid.y is capped at 65535
    const long long r0 = tr * kTile;
    {
      const long long c = c0 + threadIdx.x;
      for (int i = threadIdx.y; i < kTile; i += kPass)
        if (r0 + i < rows && c < cols) tile[i][threadIdx.x] = in[(r0 + i) * ldi + c];
    }
    __syncthreads();
    {
      const long long r = r0 + threadIdx.x;
      for (int i = threadIdx.y; i < kTile; i += kPass)
        if (c0 + i < cols && r < rows) out[(c0 + i) * ldo + r] = tile[threadIdx.x][i];
    }
    __syncthreads();
  }
}

template <typename T>
void launch(const TransposeParams& p, cudaStream_t stream) {
  const long long rows = p.in.rows, cols = p.in.cols;
  const long long row_tiles = (rows + kTile - 1) / kTile, col_tiles = (cols + kTile - 1) / kTile;
  SK_EXPECTS(col_tiles <= 0x7fffffffLL, "transpose: `in` has too many columns (", cols, ")");
  const dim3 grid(static_cast<unsigned>(col_tiles), static_cast<unsigned>(std::min<long long>(row_tiles, 65535)));
  transpose_kernel<T><<<grid, dim3(kTile, kPass), 0, stream>>>(
      static_cast<const T*>(p.in.data), static_cast<T*>(p.out.data), rows, cols, p.in.row_stride,
      p.out.row_stride, row_tiles);
  SK_CUDA_CHECK_LAUNCH();
}

}  // namespace

void transpose_cuda(const TransposeParams& p, Stream stream) {
  sparsekern::detail::require_cuda_device(p.device.index);
  sparsekern::detail::DeviceGuard guard(p.device.index);
  auto s = static_cast<cudaStream_t>(stream);
  switch (dtype_size(p.dtype)) {
    case 2: launch<std::uint16_t>(p, s); return;
    case 4: launch<std::uint32_t>(p, s); return;
    case 8: launch<std::uint64_t>(p, s); return;
    default: throw TypeMismatch("transpose: unsupported dtype");
  }
}

}  // namespace sparsekern::dense::detail
