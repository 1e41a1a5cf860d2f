// CUDA backend of the block-sparse products: picks the tensor-core kernel (src/bsr/tc) when the
// dtype, the GPU and the operand layouts allow it, else a SIMT kernel that handles any dtype and
// any strides (fp32 without TF32, fp64, pre-Ampere GPUs, unaligned views).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>

#include <cstdlib>
#include <cstring>
#include <string>

#include "../common/cuda_check.h"
#include "bsr_internal.h"
#include "device_types.cuh"
#include "sm90/dds_sm90.h"
#include "tc/launch.h"

namespace sparsekern::bsr::detail {
namespace {

using sparsekern::detail::concat;

// ------------------------------------------------------------------------------------------------
// SIMT kernels (16×16 threads; fp32 accumulation, fp64 for fp64)
// ------------------------------------------------------------------------------------------------
template <typename T> struct Acc { using type = float; };
template <> struct Acc<double> { using type = double; };

template <typename T> __device__ __forceinline__ typename Acc<T>::type to_acc(T x) { return x; }
template <> __device__ __forceinline__ float to_acc(__half x) { return __half2float(x); }
template <> __device__ __forceinline__ float to_acc(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T from_acc(typename Acc<T>::type x) { return x; }
template <> __device__ __forceinline__ __half from_acc(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_acc(float x) { return __float2bfloat16_rn(x); }

struct SimtDds {
  const void* a;
  std::int64_t a_rs, a_cs;
  void* c;
  std::int64_t c_rs, c_cs;
  const void* bias;
  const void* values;
  const std::int32_t* offsets;
  const std::int32_t* indices;
  const std::int32_t* value_index;
  std::int64_t m;
  int block;
  bool transposed_blocks;
};

constexpr int kSimtRows = 64;  // rows of C per CTA: 4 per thread, amortising each B tile load

/// C tile of 64 rows × 16 columns of one block column; K-slices of 16 of each non-zero block.
template <typename T>
__global__ void __launch_bounds__(256) dds_simt_kernel(SimtDds p) {
  using A = typename Acc<T>::type;
  __shared__ A sA[kSimtRows][17];
  __shared__ A sB[16][17];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int b = p.block, nsub = b / 16;
  const int j = blockIdx.x / nsub, n_off = (blockIdx.x % nsub) * 16;
  const std::int64_t m0 = std::int64_t(blockIdx.y) * kSimtRows;
  const T* a = static_cast<const T*>(p.a);
  const T* vals = static_cast<const T*>(p.values);
  A acc[4] = {0, 0, 0, 0};
  for (int e = p.offsets[j]; e < p.offsets[j + 1]; ++e) {
    const std::int64_t kb = p.indices[e];
    const std::int64_t vi = p.value_index ? p.value_index[e] : e;
    const T* blk = vals + vi * b * b;
    for (int k0 = 0; k0 < b; k0 += 16) {
      for (int q = 0; q < 4; ++q) {
        const std::int64_t r = m0 + ty + 16 * q;
        sA[ty + 16 * q][tx] =
            r < p.m ? to_acc(a[r * p.a_rs + (kb * b + k0 + tx) * p.a_cs]) : A(0);
      }
      // Bop(k0 + ty, n_off + tx)
      sB[ty][tx] = to_acc(p.transposed_blocks ? blk[(n_off + tx) * b + k0 + ty]
                                              : blk[(k0 + ty) * b + n_off + tx]);
      __syncthreads();
      for (int kk = 0; kk < 16; ++kk) {
        const A bv = sB[kk][tx];
        for (int q = 0; q < 4; ++q) acc[q] += sA[ty + 16 * q][kk] * bv;
      }
      __syncthreads();
    }
  }
  const std::int64_t col = std::int64_t(j) * b + n_off + tx;
  const A bias = p.bias ? to_acc(static_cast<const T*>(p.bias)[col]) : A(0);
  T* c = static_cast<T*>(p.c);
  for (int q = 0; q < 4; ++q) {
    const std::int64_t r = m0 + ty + 16 * q;
    if (r < p.m) c[r * p.c_rs + col * p.c_cs] = from_acc<T>(acc[q] + bias);
  }
}

struct SimtSdd {
  const void* a;
  std::int64_t a_rs, a_cs;
  const void* b;
  std::int64_t b_rs, b_cs;
  void* out;
  const std::int32_t* block_rows;
  const std::int32_t* block_cols;
  std::int64_t k;
  int block;
};

/// One 16×16 tile of one block per CTA, dense K loop in slices of 16.
template <typename T>
__global__ void __launch_bounds__(256) sdd_simt_kernel(SimtSdd p) {
  using A = typename Acc<T>::type;
  __shared__ A sA[16][17];
  __shared__ A sB[16][17];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int b = p.block, nsub = b / 16;
  const std::int64_t blk = blockIdx.x / (nsub * nsub);
  const int sub = blockIdx.x % (nsub * nsub);
  const int m_off = (sub / nsub) * 16, n_off = (sub % nsub) * 16;
  const std::int64_t col = std::int64_t(p.block_cols[blk]) * b + n_off + tx;
  const std::int64_t row_ld = std::int64_t(p.block_rows[blk]) * b + m_off + tx;  // for sA loads
  const T* a = static_cast<const T*>(p.a);
  const T* bm = static_cast<const T*>(p.b);
  A acc = 0;
  for (std::int64_t k0 = 0; k0 < p.k; k0 += 16) {
    // sA[r][kk] = A(row0 + r, k0 + kk): thread (tx, ty) loads r = tx, kk = ty (coalesced when A is
    // column-major, the common case: the transposed activations of a weight gradient).
    sA[tx][ty] = k0 + ty < p.k ? to_acc(a[row_ld * p.a_rs + (k0 + ty) * p.a_cs]) : A(0);
    sB[ty][tx] = k0 + ty < p.k ? to_acc(bm[(k0 + ty) * p.b_rs + col * p.b_cs]) : A(0);
    __syncthreads();
    for (int kk = 0; kk < 16; ++kk) acc += sA[ty][kk] * sB[kk][tx];
    __syncthreads();
  }
  T* out = static_cast<T*>(p.out);
  out[blk * b * b + std::int64_t(m_off + ty) * b + n_off + tx] = from_acc<T>(acc);
}

/// out[v] (cols × rows, row stride ld_out) = in[v]ᵀ (in[v]: rows × cols, row stride ld_in, unit
/// column stride) for v < batch: 64 × 64 tiles through shared memory, read and written as 16-byte
/// vectors where the tile is whole and the lines aligned (scalar otherwise). Copies the tf32
/// operands that wgmma must read K-major (the blocks of a dds with Bop = S, the operands of a
/// weight gradient's sdd). One flat grid over (v, tile row, tile column).
struct TransposeArgs {
  const float* in;
  float* out;
  std::int64_t rows, cols, ld_in, ld_out, in_batch, out_batch;
  std::int64_t tile_rows, tile_cols;
  bool vec;  // 16-byte aligned bases, batch strides and line strides
};

bool aligned16(const void* p);

constexpr int kTT = 64;  // transpose tile edge

__global__ void __launch_bounds__(256) transpose_f32_kernel(TransposeArgs p) {
  __shared__ float tile[kTT][kTT + 1];
  const std::int64_t per = p.tile_rows * p.tile_cols;
  const std::int64_t id = blockIdx.x, v = id / per, t = id - v * per;
  const std::int64_t r0 = (t / p.tile_cols) * kTT, c0 = (t % p.tile_cols) * kTT;
  const float* in = p.in + v * p.in_batch;
  float* out = p.out + v * p.out_batch;
  const int tx = int(threadIdx.x) % 16, ty = int(threadIdx.x) / 16;  // 16 vectors of 4 per line
  const bool whole = p.vec && r0 + kTT <= p.rows && c0 + kTT <= p.cols;
  if (whole) {
#pragma unroll
    for (int i = 0; i < kTT; i += 16) {
      const float4 x = *reinterpret_cast<const float4*>(in + (r0 + i + ty) * p.ld_in + c0 + 4 * tx);
      tile[i + ty][4 * tx] = x.x;
      tile[i + ty][4 * tx + 1] = x.y;
      tile[i + ty][4 * tx + 2] = x.z;
      tile[i + ty][4 * tx + 3] = x.w;
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kTT; i += 16) {
      const int c = i + ty;
      *reinterpret_cast<float4*>(out + (c0 + c) * p.ld_out + r0 + 4 * tx) =
          make_float4(tile[4 * tx][c], tile[4 * tx + 1][c], tile[4 * tx + 2][c], tile[4 * tx + 3][c]);
    }
    return;
  }
  const int lx = int(threadIdx.x) % 64, ly = int(threadIdx.x) / 64;  // 4 lines of 64 per pass
  for (int i = ly; i < kTT; i += 4) {
    const std::int64_t r = r0 + i, c = c0 + lx;
    if (r < p.rows && c < p.cols) tile[i][lx] = in[r * p.ld_in + c];
  }
  __syncthreads();
  for (int i = ly; i < kTT; i += 4) {
    const std::int64_t c = c0 + i, r = r0 + lx;
    if (c < p.cols && r < p.rows) out[c * p.ld_out + r] = tile[lx][i];
  }
}

void transpose_f32(const void* in, std::int64_t batch, std::int64_t rows, std::int64_t cols, std::int64_t ld_in,
                   std::int64_t in_batch, void* out, std::int64_t ld_out, std::int64_t out_batch, cudaStream_t stream) {
  const bool vec = aligned16(in) && aligned16(out) && ld_in % 4 == 0 && ld_out % 4 == 0 && in_batch % 4 == 0 &&
                   out_batch % 4 == 0;
  TransposeArgs a{static_cast<const float*>(in), static_cast<float*>(out), rows, cols, ld_in, ld_out, in_batch,
                  out_batch, (rows + kTT - 1) / kTT, (cols + kTT - 1) / kTT, vec};
  const std::int64_t blocks = batch * a.tile_rows * a.tile_cols;
  if (blocks == 0) return;
  SK_EXPECTS(blocks <= INT_MAX, "bsr: operand too large to transpose in one launch (", rows, " x ", cols, ")");
  transpose_f32_kernel<<<unsigned(blocks), 256, 0, stream>>>(a);
  SK_CUDA_CHECK_LAUNCH();
}

/// out_values[p] = C[block_rows[p]·b …, block_cols[p]·b …] (b × b) for each block p: the blocks of
/// a sampled product computed whole (sdd_dense), 16-byte vectors (C's rows and the blocks are
/// 16-byte aligned: see sdd_dense).
struct GatherArgs {
  const char* c;
  std::int64_t ldc_bytes;
  char* out;
  const std::int32_t* block_rows;
  const std::int32_t* block_cols;
  int row_bytes;  // b · element size: a block line
  int b;
  std::int64_t nnz;
};

__global__ void __launch_bounds__(256) gather_blocks_kernel(GatherArgs g) {
  // (block, vector) pairs as one grid-stride loop, so that small blocks (32 vectors at b = 16)
  // still keep every thread busy.
  const int vecs = g.row_bytes / 16, per = vecs * g.b;
  const std::int64_t total = g.nnz * per;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < total;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t p = i / per;
    const int w = int(i - p * per), r = w / vecs, v = w - r * vecs;
    const char* src = g.c + (std::int64_t(g.block_rows[p]) * g.b + r) * g.ldc_bytes +
                      std::int64_t(g.block_cols[p]) * g.row_bytes + v * 16;
    *reinterpret_cast<int4*>(g.out + i * 16) = *reinterpret_cast<const int4*>(src);
  }
}

/// Bop written dense (dds_dense): CTA (j, y) copies the entries e = offsets[j] + y, + gridDim.y, …
/// of block column j, each the block b × b at (block row indices[e], j), read from
/// values[value_index[e] or e], transposed when Bop's blocks are the stored blocks' transposes.
/// Elements move as raw words of their size (U), written as 16-byte vectors. The rest of Bop is
/// zeroed before (cudaMemsetAsync). Versions measured (whole dense path, forward, bf16, 8192 ×
/// 4096 → 4096, d = 0.05-0.75; F.linear 342 µs on the H100, 348 on the H200): one CTA per entry
/// that found its column by a binary search over the offsets, scalar copies: b = 16 363-491 µs,
/// b = 32 358-413 (H100); CTAs per block column, scalar copies: 352-440 and 350-409 (H200);
/// transposes through 32 × 32 shared-memory tiles: 355-475 and 353-437 (H200, slower: two
/// barriers per tile).
struct ScatterArgs {
  const void* values;
  const std::int32_t* offsets;
  const std::int32_t* indices;
  const std::int32_t* value_index;
  void* dense;
  std::int64_t ld;  // elements per row of Bop (n)
  int b;
  bool transposed;
  bool vec;  // 16-byte aligned values and rows of whole 16-byte vectors
};

template <typename U>
__global__ void __launch_bounds__(256) scatter_blocks_kernel(ScatterArgs s) {
  constexpr int kEpv = 16 / int(sizeof(U));  // elements per 16-byte vector
  const int j = int(blockIdx.x), b = s.b;
  const int end = s.offsets[j + 1];
  U* col = static_cast<U*>(s.dense) + std::int64_t(j) * b;
  const int first = s.offsets[j] + int(blockIdx.y), stride = int(gridDim.y);
  // The CTA's entries × the vectors (or elements) of their rows as one flat loop: every thread
  // busy even for 16 × 16 blocks, independent loads.
  const std::int64_t count = first < end ? (end - first + stride - 1) / stride : 0;
  const int vpr = s.vec ? b / kEpv : b, per = b * vpr;
  for (std::int64_t t = threadIdx.x; t < count * per; t += blockDim.x) {
    const std::int64_t q = t / per;
    const int w = int(t - q * per), e = first + int(q) * stride, r = w / vpr, c = w - r * vpr;
    const std::int64_t v = s.value_index != nullptr ? s.value_index[e] : e;
    const U* src = static_cast<const U*>(s.values) + v * b * b;
    U* dst = col + (std::int64_t(s.indices[e]) * b + r) * s.ld;
    if (!s.vec) {
      dst[c] = s.transposed ? src[c * b + r] : src[r * b + c];
    } else if (!s.transposed) {
      reinterpret_cast<int4*>(dst)[c] = reinterpret_cast<const int4*>(src + r * b)[c];
    } else {  // Bop(r, c) = src[c · b + r]: kEpv strided loads, one 16-byte store
      union {
        int4 v4;
        U u[kEpv];
      } pack;
#pragma unroll
      for (int i = 0; i < kEpv; ++i) pack.u[i] = src[(c * kEpv + i) * b + r];
      reinterpret_cast<int4*>(dst)[c] = pack.v4;
    }
  }
}

/// c[r, :] = bias for every row r < m (the dense path's C before cuBLAS accumulates into it): 16-byte
/// vectors (U = int4) where rows and bias allow, else elements.
template <typename U>
__global__ void __launch_bounds__(256) fill_rows_kernel(U* c, std::int64_t ldc, const U* bias, std::int64_t m,
                                                        std::int64_t n) {
  const std::int64_t total = m * n;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < total;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / n, col = i - r * n;
    c[r * ldc + col] = bias[col];
  }
}

/// c[r, :] += bias for every row r < m, fp32 (the dense path's bias with fp32 operands, added after
/// cuBLAS: see dds_dense): float4 vectors where rows and bias are 16-byte aligned.
__global__ void __launch_bounds__(256) add_rows_f32_kernel(float* c, std::int64_t ldc, const float* bias,
                                                           std::int64_t m, std::int64_t n, bool vec) {
  const std::int64_t w = vec ? n / 4 : n, total = m * w;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < total;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / w, q = i - r * w;
    if (vec) {
      float4* row = reinterpret_cast<float4*>(c + r * ldc);
      float4 v = row[q];
      const float4 b = reinterpret_cast<const float4*>(bias)[q];
      v.x += b.x;
      v.y += b.y;
      v.z += b.z;
      v.w += b.w;
      row[q] = v;
    } else {
      c[r * ldc + q] += bias[q];
    }
  }
}

void dds_simt(const DdsProblem& p, cudaStream_t stream) {
  SimtDds k{p.a.data, p.a.row_stride, p.a.col_stride, p.c.data, p.c.row_stride, p.c.col_stride,
            p.bias, p.s.values, p.s.offsets, p.s.indices, p.s.value_index, 0,
            int(p.s.block), p.s.transposed_blocks};
  const std::int64_t n_tiles = p.s.n_blocks * (p.s.block / 16);
  SK_EXPECTS(n_tiles <= INT_MAX, "bsr: too many block columns for one launch (", p.s.n_blocks, ")");
  const std::int64_t elem = dtype_size(p.dtype);
  // gridDim.y is limited to 65535: tall problems run as several launches of row panels.
  constexpr std::int64_t kRowsPerLaunch = std::int64_t(65535) * kSimtRows;
  for (std::int64_t m0 = 0; m0 < p.a.rows; m0 += kRowsPerLaunch) {
    k.m = std::min(p.a.rows - m0, kRowsPerLaunch);
    k.a = static_cast<const char*>(p.a.data) + m0 * p.a.row_stride * elem;
    k.c = static_cast<char*>(p.c.data) + m0 * p.c.row_stride * elem;
    const dim3 grid(unsigned(n_tiles), unsigned((k.m + kSimtRows - 1) / kSimtRows));
    with_device_type(p.dtype, [&](auto t) {
      dds_simt_kernel<decltype(t)><<<grid, dim3(16, 16), 0, stream>>>(k);
    });
    SK_CUDA_CHECK_LAUNCH();
  }
}

void sdd_simt(const SddParams& p, cudaStream_t stream) {
  const std::int64_t b = p.pattern.block_size;
  const std::int64_t ctas = p.pattern.nnz_blocks * (b / 16) * (b / 16);
  SK_EXPECTS(ctas <= INT_MAX, "bsr.sdd: too many blocks for one launch (", p.pattern.nnz_blocks, ")");
  SimtSdd k{p.a.data, p.a.row_stride, p.a.col_stride, p.b.data, p.b.row_stride, p.b.col_stride,
            p.out_values, p.pattern.block_row_indices, p.pattern.block_col_indices, p.a.cols, int(b)};
  with_device_type(p.dtype, [&](auto t) {
    sdd_simt_kernel<decltype(t)><<<unsigned(ctas), dim3(16, 16), 0, stream>>>(k);
  });
  SK_CUDA_CHECK_LAUNCH();
}

// ------------------------------------------------------------------------------------------------
// Tensor-core path selection
// ------------------------------------------------------------------------------------------------
struct DeviceInfo {
  int major = 0, minor = 0, sms = 0;
};

/// Compute capability and multiprocessor count of `device`, queried once per device (cached as
/// one packed atomic word, so a concurrent reader never sees half of an entry).
DeviceInfo device_info(int device) {
  static std::atomic<std::uint64_t> cached[64] = {};  // 0 = unknown; else sms << 16 | major << 8 | minor
  if (device >= 0 && device < 64) {
    const std::uint64_t w = cached[device].load(std::memory_order_relaxed);
    if (w != 0) return DeviceInfo{int((w >> 8) & 0xff), int(w & 0xff), int(w >> 16)};
  }
  DeviceInfo d;
  SK_CUDA_TRY(cudaDeviceGetAttribute(&d.major, cudaDevAttrComputeCapabilityMajor, device));
  SK_CUDA_TRY(cudaDeviceGetAttribute(&d.minor, cudaDevAttrComputeCapabilityMinor, device));
  SK_CUDA_TRY(cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, device));
  if (device >= 0 && device < 64) {
    cached[device].store(std::uint64_t(d.sms) << 16 | std::uint64_t(d.major & 0xff) << 8 | std::uint64_t(d.minor & 0xff),
                         std::memory_order_relaxed);
  }
  return d;
}

/// SPARSEKERN_BSR_SM90=0 keeps Hopper GPUs on the SM80 (mma.sync) kernels: for comparisons.
bool sm90_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("SPARSEKERN_BSR_SM90");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return on;
}

/// The sm_90a dds tile schedule when the caller passed a workspace: SPARSEKERN_BSR_SCHEDULE=auto
/// | static | dynamic | heavy (read once per process; default auto: tiles from an atomic counter,
/// each row panel's heaviest columns first, where sm90::use_dynamic_tiles says so, else static;
/// see sm90/dds_sm90.cuh). static ignores the workspace; dynamic and heavy force those schedules.
int schedule() {
  static const int mode = [] {
    const char* v = std::getenv("SPARSEKERN_BSR_SCHEDULE");
    if (v == nullptr || *v == '\0' || std::strcmp(v, "auto") == 0) return int(sm90::kAuto);
    if (std::strcmp(v, "heavy") == 0) return int(sm90::kHeavyFirst);
    if (std::strcmp(v, "dynamic") == 0) return int(sm90::kDynamic);
    if (std::strcmp(v, "static") == 0) return int(sm90::kStatic);
    throw InvalidArgument(std::string("SPARSEKERN_BSR_SCHEDULE must be auto, static, dynamic or heavy; got '") + v +
                          "'");
  }();
  return mode;
}

/// SPARSEKERN_BSR_DDS_DENSE (read once per process): whether a dds may write Bop dense and
/// multiply with cuBLAS (dds_dense). auto: where dds_dense_min_density says it is faster; 0: never;
/// 1: wherever the dtype allows (comparisons).
int dds_dense_mode() {
  static const int mode = auto_off_on("SPARSEKERN_BSR_DDS_DENSE");
  return mode;
}

/// SPARSEKERN_BSR_SDD_DENSE (read once per process): whether an sdd may compute the whole product
/// with cuBLAS and copy out the pattern's blocks (sdd_dense); values as for dds_dense_mode.
int sdd_dense_mode() {
  static const int mode = auto_off_on("SPARSEKERN_BSR_SDD_DENSE");
  return mode;
}

/// SPARSEKERN_BSR_TMA_STORE (read once per process): auto / 1 (the default) let the 16-bit grouped
/// sm_90a dds store its tiles through shared memory and TMA wherever C admits a descriptor; 0 stores
/// them from registers, as before that epilogue (comparisons).
bool tma_store_enabled() {
  static const bool on = auto_off_on("SPARSEKERN_BSR_TMA_STORE") != 0;
  return on;
}

bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15) == 0; }

/// The dtype can use tensor cores on this device: fp16/bf16 always, fp32 only with TF32 allowed.
bool tc_dtype(DType dtype, dense::Fp32Math math, int device) {
  const bool ok = dtype == DType::f16 || dtype == DType::bf16 ||
                  (dtype == DType::f32 && math == dense::Fp32Math::tf32);
  return ok && device_info(device).major >= 8;
}

/// A view whose `unit` stride is 1 and whose other stride (`ld`) keeps every line 16-byte
/// aligned; `lines` is the extent along the other stride (a single line needs no alignment).
bool tc_operand(const void* data, std::int64_t unit, std::int64_t ld, std::int64_t lines,
                std::int64_t vec) {
  return aligned16(data) && unit == 1 && (lines <= 1 || ld % vec == 0);
}

/// tile = min(b, 64) for dds (see tc/configs.cuh).
template <bool kTf32, bool kBKMajor>
void dds_tc_launch(const tc::TcParams& t, int n_blocks, int block, void* stream) {
  switch (block) {
    case 16: tc::dds_launch<kTf32, 16, kBKMajor>(t, n_blocks, stream); return;
    case 32: tc::dds_launch<kTf32, 32, kBKMajor>(t, n_blocks, stream); return;
    default: tc::dds_launch<kTf32, 64, kBKMajor>(t, n_blocks, stream); return;
  }
}

#if SPARSEKERN_BSR_SM90A
/// Whether a dds with blocks of 32/64/128 (16-bit) or 64/128 (tf32) runs the grouped sm_90a kernel
/// (sm90/gdds_sm90.cuh: 256 × 128 tiles over the union of 128 / b block columns' k blocks) rather
/// than the one-block-column kernel. The grouped tile loads each A tile once for every block column
/// of its group that has a block there, which pays when those columns share k blocks, i.e. at
/// higher density; at low density the union adds steps with a single block. For b = 128 the tile
/// is one block column of 256 rows (each block slice feeds 256 rows instead of 128).
/// SPARSEKERN_BSR_GROUPED=1 / 0 forces either kernel (read once per process).
///
/// 16-bit (session 15, H100, kernel µs, grouped kernel with its shared-memory + TMA epilogue vs one
/// column, forward / input gradient; tools/diag/bsr_epilogue.py, benchmarks/results/bsr-epilogue-
/// H100-2026-11-26-session15*.txt): at 8192 × 4096 → 4096, b = 128, 55.1 / 49.4 vs 56.0 / 51.8 at
/// d = 0.05, 64.3 / 60.6 vs 67.5 / 66.1 at 0.1, 118.3 / 116.3 vs 142.6 / 142.9 at 0.25; b = 64
/// even at 0.05 (59.6 / 55.6 vs 58.7 / 56.9), 80.5 / 78.9 vs 88.1 / 87.9 at 0.1; at 768 → 3072
/// (768 tiles) b = 64 27.7 vs 37.5 already at d = 0.05, b = 128 ahead at 0.05 and from 0.25 (even
/// at 0.1, 3 blocks per column at 0.5: 47.0 vs 48.0). So with at least kGroupedMinWaves tiles per
/// SM: from d = 0.04 for b = 64 and 128 (before the TMA epilogue: 0.075 and 0.2 with 6 blocks per
/// column). With fewer tiles: at 2048 × 4096 → 4096 (256 tiles, 1.9 per SM) grouped ahead at d = 0.25
/// (b = 128 35.3 vs 39.2, b = 64 45.9 vs 52.6; one column ahead at 0.05-0.1: threshold 0.2 between
/// them), at 192 tiles (1.45 per SM: BERT-base 3072 → 768 forward) the one-column kernel ahead at
/// every density.
/// b = 32: one column below d = 0.4 (the dense path takes over from 0.35 at these shapes).
/// tf32 (session 9, H200, dynamic tiles, register epilogue): 156 vs 128, 184 vs 151, 272 vs 271,
/// 443 vs 500 µs at b = 128, d = 0.05 / 0.1 / 0.25 / 0.5; b = 64 162 vs 126, 209 vs 166, 353 vs
/// 360, 554 vs 698: from 0.3 (b = 128, with 6 blocks per column: the grouped kernel does not
/// overlap its epilogue, which short columns expose) and 0.2 (b = 64), with kGroupedMinWaves tiles
/// per SM (BERT-base at 8192 rows: 192 tiles for 132 SMs, no faster). Session 24 (H100, kernel µs
/// one column vs grouped, 8192 × 4096 → 4096; tools/diag/s24_run8.sh, benchmarks/results/bsr-tf32-
/// grouped-H100-2026-11-27-session24.txt): b = 128 253.8 vs 273.1 at d = 0.2, 305 vs 304 at 0.25,
/// 361 vs 342-343 at 0.3 (a requested 0.3 is 307 of 1024 blocks, 0.2998: under the old threshold of
/// 0.3); b = 64 340 vs 345 at 0.2, 416 vs 392 at 0.25. So b = 128 from 0.27.
constexpr double kGroupedMinDensity16 = 0.04, kGroupedMinDensity32 = 0.4, kGroupedMinDensityFewTiles = 0.2;
constexpr double kGroupedMinDensityTf32 = 0.2, kGroupedMinDensityTf32_128 = 0.27;
constexpr double kGroupedMinWaves = 4.0, kGroupedMinWavesFew = 1.9;
constexpr double kGroupedMinBlocksPerColTf32_128 = 6.0;

bool use_grouped(int b, bool tf32, std::int64_t nnz, std::int64_t n_block_cols, std::int64_t k_blocks,
                 std::int64_t m, int sms) {
  static const int forced = [] {
    const char* v = std::getenv("SPARSEKERN_BSR_GROUPED");
    return v == nullptr || *v == '\0' ? -1 : std::strcmp(v, "0") == 0 ? 0 : 1;
  }();
  if (b != 32 && b != 64 && b != 128) return false;
  if (forced >= 0) return forced == 1;
  const double cells = double(n_block_cols) * double(k_blocks);
  const double density = cells > 0 ? double(nnz) / cells : 0.0;
  const double tiles = double((m + 255) / 256) * double((n_block_cols * b + 127) / 128);
  const double waves = tiles / double(std::max(sms, 1));
  if (tf32) {
    if (waves < kGroupedMinWaves) return false;
    if (b == 128)
      return density >= kGroupedMinDensityTf32_128 && double(nnz) >= kGroupedMinBlocksPerColTf32_128 * double(n_block_cols);
    return density >= kGroupedMinDensityTf32;
  }
  if (b == 32) return waves >= kGroupedMinWaves && density >= kGroupedMinDensity32;
  if (waves >= kGroupedMinWaves) return density >= kGroupedMinDensity16;
  return waves >= kGroupedMinWavesFew && density >= kGroupedMinDensityFewTiles;
}

template <sm90::Elem kE>
bool dds_sm90_block(const tc::TcParams& t, int nb, int b, bool bt, int sms, void* stream) {
  if (use_grouped(b, false, t.nnz, nb, t.a_cols / b, t.m, sms)) {  // tiles of several block columns
    if (b == 32) return bt ? sm90::gdds_launch<kE, 32, true>(t, nb, sms, stream) : sm90::gdds_launch<kE, 32, false>(t, nb, sms, stream);
    if (b == 64) return bt ? sm90::gdds_launch<kE, 64, true>(t, nb, sms, stream) : sm90::gdds_launch<kE, 64, false>(t, nb, sms, stream);
    return bt ? sm90::gdds_launch<kE, 128, true>(t, nb, sms, stream) : sm90::gdds_launch<kE, 128, false>(t, nb, sms, stream);
  }
  switch (b) {
    case 32: return bt ? sm90::dds_launch<kE, 32, true>(t, nb, sms, stream) : sm90::dds_launch<kE, 32, false>(t, nb, sms, stream);
    case 64: return bt ? sm90::dds_launch<kE, 64, true>(t, nb, sms, stream) : sm90::dds_launch<kE, 64, false>(t, nb, sms, stream);
    default: return bt ? sm90::dds_launch<kE, 128, true>(t, nb, sms, stream) : sm90::dds_launch<kE, 128, false>(t, nb, sms, stream);
  }
}
#endif

/// The sm_90a dds; false when it did not launch (a TMA descriptor refused: run the SM80 kernel).
bool dds_sm90(const tc::TcParams& t, int nb, int b, bool bt, DType dtype, int sms, void* stream) {
#if SPARSEKERN_BSR_SM90A
  if (dtype == DType::f32) {  // tf32: Bop = Sᵀ, b ∈ {64, 128} (checked by the caller)
    if (use_grouped(b, true, t.nnz, nb, t.a_cols / b, t.m, sms))
      return b == 64 ? sm90::gdds_launch<sm90::Elem::tf32, 64, true>(t, nb, sms, stream)
                     : sm90::gdds_launch<sm90::Elem::tf32, 128, true>(t, nb, sms, stream);
    return b == 64 ? sm90::dds_launch<sm90::Elem::tf32, 64, true>(t, nb, sms, stream)
                   : sm90::dds_launch<sm90::Elem::tf32, 128, true>(t, nb, sms, stream);
  }
  if (dtype == DType::bf16) return dds_sm90_block<sm90::Elem::bf16>(t, nb, b, bt, sms, stream);
  return dds_sm90_block<sm90::Elem::f16>(t, nb, b, bt, sms, stream);
#else
  (void)t, (void)nb, (void)b, (void)bt, (void)dtype, (void)sms, (void)stream;
  return false;
#endif
}

/// SPARSEKERN_BSR_SDD_GROUP=auto | 0 | 1 (read once per process): whether the SM80 sdd of 16-bit
/// blocks of 32 runs grouped (tc/kernel.cuh's sdd_group_body: up to four blocks of one block row per
/// CTA) or one block per CTA: 1 always, 0 never, auto from kSddGroupMinBlocksPerSm blocks per SM.
/// Returns 1, 0 or -1 (auto).
int sdd_group_mode() {
  static const int mode = auto_off_on("SPARSEKERN_BSR_SDD_GROUP");
  return mode;
}

/// Blocks per SM from which auto groups. H100 (132 SMs), 8192 x 4096 -> 4096 weight gradient, 16-bit
/// b = 32, kernel µs one block per CTA -> grouped (tools/diag/s19_run8.sh, s19_run10.sh): d = 0.1
/// (1638 blocks, 12.4 per SM) 275-279 -> 204-207; d = 0.05 (819 blocks, 6.2 per SM) 115-119 ->
/// 171-197: a group holds ~2.5 blocks there, and the ~330 CTAs of 8 warps fill the SMs worse than
/// 819 CTAs of 4. The same grouping of tf32 tiles (b = 32 in fours, 64-wide tiles of b = 64 / 128 in
/// pairs) measured 7-36% slower at d = 0.05-0.25, so tf32 has no grouped kernel.
constexpr int kSddGroupMinBlocksPerSm = 8;

/// Whether the SM80 sdd of nnz blocks of b runs grouped (16-bit blocks of 32 only).
bool sdd_grouped(bool tf32, std::int64_t nnz, int block, int device) {
  if (tf32 || block != 32) return false;
  const int mode = sdd_group_mode();
  if (mode == 0) return false;
  return mode > 0 || nnz >= std::int64_t(kSddGroupMinBlocksPerSm) * device_info(device).sms;
}

/// The grouped SM80 sdd where it applies (false: nothing launched).
template <bool kTf32>
bool sdd_group_tc_launch(const tc::TcParams& t, int nnz, int block, int device, void* stream) {
  if constexpr (kTf32) {
    (void)t, (void)nnz, (void)block, (void)device, (void)stream;
    return false;
  } else {
    if (!sdd_grouped(false, nnz, block, device)) return false;
    tc::sdd_group_launch<false, 32, 4>(t, nnz, stream);
    return true;
  }
}

/// tile = b, except tf32 b = 128: four 64 × 64 tiles (see tc/configs.cuh); grouped tiles where
/// sdd_group_tc_launch takes the product.
template <bool kTf32>
void sdd_tc_launch(const tc::TcParams& t, int nnz, int block, int device, void* stream) {
  if (sdd_group_tc_launch<kTf32>(t, nnz, block, device, stream)) return;
  switch (block) {
    case 16: tc::sdd_launch<kTf32, 16>(t, nnz, stream); return;
    case 32: tc::sdd_launch<kTf32, 32>(t, nnz, stream); return;
    case 64: tc::sdd_launch<kTf32, 64>(t, nnz, stream); return;
    default:
      if constexpr (kTf32) tc::sdd_launch<kTf32, 64>(t, nnz, stream);
      else tc::sdd_launch<kTf32, 128>(t, nnz, stream);
      return;
  }
}

/// The SM80 sdd's tile side for blocks of b (sdd_tc_launch's choice, grouped kernels aside).
int sdd_tc_tile(bool tf32, int block) { return tf32 && block == 128 ? 64 : block; }

}  // namespace

}  // namespace sparsekern::bsr::detail

namespace sparsekern::bsr::sm90 {
bool built() { return SPARSEKERN_BSR_SM90A != 0; }
}  // namespace sparsekern::bsr::sm90

namespace sparsekern::bsr::detail {

bool tf32_wgmma(int device, std::int64_t block) {
  if (!sm90::built() || !sm90_enabled() || (block != 64 && block != 128)) return false;
  const DeviceInfo dev = device_info(device);
  return dev.major == 9 && dev.minor == 0;
}

/// SPARSEKERN_BSR_SDD_SPLIT=auto | 0 | N (read once per process): the split-K count of the sdd
/// kernels (the sm_90a 16-bit one and the SM80 one, grouped tiles aside); 0 never splits, N ≥ 2
/// splits every such product N ways (at most one split per k-step: 64 wide on sm_90a, 32 on
/// SM80), for tests and comparisons. -1 for auto.
int sdd_split_mode() {
  static const int mode = [] {
    const char* v = std::getenv("SPARSEKERN_BSR_SDD_SPLIT");
    if (v == nullptr || *v == '\0' || std::strcmp(v, "auto") == 0) return -1;
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (*end != '\0' || n < 0 || n == 1 || n > 64) {
      throw InvalidArgument(std::string("SPARSEKERN_BSR_SDD_SPLIT must be auto, 0 or a count from 2 to 64; got '") +
                            v + "'");
    }
    return int(n);
  }();
  return mode;
}

/// k-steps (of 32) per split of `splits` over k, and the splits that then hold any (no empty split).
int sdd_tc_split_steps(std::int64_t k, int& splits) {
  const std::int64_t nk = (k + 31) / 32;
  const std::int64_t steps = (nk + splits - 1) / splits;
  splits = int((nk + steps - 1) / steps);
  return int(steps);
}

/// K splits of the SM80 sdd (1: none; see sdd_splits for the sm_90a kernel). Its CTAs are tiles of
/// one block; a pattern of a few CTAs per SM leaves the SMs short of work through the whole K loop.
/// Auto: about kSddTcSplitCtasPerSm CTAs per SM in all, at most 8 splits, each at least 8 k-steps of
/// 32. Measured (H100, 8192-row weight gradients, sdd µs in a CUDA graph at 1 / 2 / 3 / 4 / 6 / 8
/// splits; session 22, tools/diag/bsr_split_ab.py): bf16 b = 32, 230 blocks (1.7 per SM; BERT-base
/// 3072 → 768 at d = 0.1) 61.5 / 42.0 / 41.0 / 41.8 / 50.7 / 55.7; 819 blocks (6.2 per SM) 116 / 167 /
/// 160 / 182 / 204 / 218; tf32 64 × 64 tiles: 408 (3.1 per SM; b = 128 d = 0.1, 4 tiles a block)
/// 307-311 / 287 / 276 / 281 / 283 / 297, 410 (b = 64 d = 0.1) 311-315 / 293 / 287 / 298 / 335 /
/// 356, 204 (1.55 per SM, b = 128 d = 0.05) 158 / 164 / 145 / 155 / 154 / 163, 205 (b = 64
/// d = 0.05) 158-160 / 169 / 159 / 181 / 183 / 205, 1024 and 1638 (7.8 and 12.4 per SM) slower at
/// every split. Beyond about five CTAs per SM the partials' extra pass costs more than the added
/// parallelism gains.
constexpr double kSddTcSplitCtasPerSm = 5.0;

int sdd_tc_splits(bool tf32, std::int64_t nnz, int block, std::int64_t k, int device) {
  const int mode = sdd_split_mode();
  if (mode == 0 || nnz <= 0 || k <= 0 || sdd_grouped(tf32, nnz, block, device)) return 1;
  const std::int64_t nk = (k + 31) / 32;
  int splits;
  if (mode > 0) {
    splits = int(std::min<std::int64_t>(mode, nk));
  } else {
    const int tile = sdd_tc_tile(tf32, block);
    const double per_sm = double(nnz) * double(block / tile) * double(block / tile) / device_info(device).sms;
    splits = int(std::min<double>(std::lround(kSddTcSplitCtasPerSm / per_sm), 8.0));
    while (splits > 1 && nk / splits < 8) --splits;
    if (splits < 2) return 1;
  }
  sdd_tc_split_steps(k, splits);
  return splits;
}

/// K splits of the sm_90a 16-bit sdd (1: none). Its tiles are 64-row slices of the blocks, one
/// per consumer warpgroup, two consumers per SM; a pattern of fewer slices than SMs leaves most of
/// the GPU idle through a long K loop (the weight gradient of a BERT-base 3072 → 768 layer at
/// d = 0.1, blocks of 128: 14 blocks, 28 slices, K = 8192 rows of the batch). Auto: about one
/// tile per SM, each split at least 8 k-steps long, at most 8 splits. Measured (H100, bf16, 8192
/// rows, the sdd alone in a CUDA graph, µs at 1 / 2 / 3 / 4 / 8 / 16 splits; session 21,
/// tools/diag/bsr_split_ab.py): 14 slices 32.9 / 22.2 / 17.1 / 14.8 / 14.2 / 21.7; 28 slices
/// 41.5 / 28.9 / 24.8 / 24.5 / 29.8 / 39.0; 52 slices 42.8 / 34.4 / 36.3 / 38.2 / 46.9; 58 slices
/// 27.5 / 25.0 / 28.4; 102 slices (b = 128 and b = 64) 50.7 / 53.8 and 32.2 / 38.2 (splitting
/// one tile per consumer, tried first, lost there). The partials cost a second pass over
/// nnz · b² · 4 · splits bytes and these products are bound by reading the operands from memory
/// once the SMs are busy, so the best total is about one tile per SM, not per consumer.
int sdd_splits(std::int64_t nnz, std::int64_t b, std::int64_t k, int sms) {
  const int mode = sdd_split_mode();
  if (mode == 0 || nnz <= 0 || k <= 0) return 1;
  const std::int64_t nk = (k + 63) / 64;
  if (mode > 0) return int(std::min<std::int64_t>(mode, nk));
  const std::int64_t tiles = nnz * (b / 64);
  const std::int64_t s = std::min<std::int64_t>({std::int64_t(sms) / tiles, nk / 8, 8});
  return s >= 2 ? int(s) : 1;
}

/// Whether `p` runs on the sm_90a 16-bit sdd (the dense path aside, and given operands the
/// tensor-core path reads): fp16 / bf16, blocks of 64 or 128, sizes below 2³¹, compute capability
/// 9.0 in a build with sm_90a.
bool sdd_16bit_sm90(const SddParams& p) {
  const std::int64_t b = p.pattern.block_size;
  if (p.device.type != DeviceType::cuda || (p.dtype != DType::f16 && p.dtype != DType::bf16) ||
      (b != 64 && b != 128) || !sm90::built() || !sm90_enabled() || p.a.cols <= 0 ||
      p.a.cols >= (std::int64_t(1) << 31) || p.a.rows >= (std::int64_t(1) << 31) ||
      p.b.cols >= (std::int64_t(1) << 31)) {
    return false;
  }
  const DeviceInfo dev = device_info(p.device.index);
  return dev.major == 9 && dev.minor == 0;
}

/// Bytes of the fp32 partials of `splits` splits of nnz blocks of b × b.
std::size_t split_partial_bytes(int splits, std::int64_t nnz, std::int64_t b) {
  return std::size_t(splits) * std::size_t(nnz) * std::size_t(b * b) * sizeof(float);
}

/// The caller's workspace as the partials of `splits` splits (> 1), or null where it has no room
/// for them (then the product runs unsplit).
float* split_partials(const SddParams& p, int splits, std::int64_t nnz, std::int64_t b) {
  if (splits < 2 || p.workspace.data == nullptr || p.workspace.bytes < split_partial_bytes(splits, nnz, b) ||
      !aligned16(p.workspace.data)) {
    return nullptr;
  }
  return static_cast<float*>(p.workspace.data);
}

std::size_t sdd_split_bytes(const SddParams& p) {
  const std::int64_t nnz = p.pattern.nnz_blocks, b = p.pattern.block_size;
  if (p.device.type != DeviceType::cuda || nnz <= 0) return 0;
  int splits = 1;
  if (sdd_16bit_sm90(p)) {
    splits = sdd_splits(nnz, b, p.a.cols, device_info(p.device.index).sms);
  } else if (tc_dtype(p.dtype, p.fp32_math, p.device.index) && (b == 16 || b == 32 || b == 64 || b == 128) &&
             p.a.cols < (std::int64_t(1) << 31)) {
    splits = sdd_tc_splits(p.dtype == DType::f32, nnz, int(b), p.a.cols, p.device.index);
  }
  return splits > 1 ? split_partial_bytes(splits, nnz, b) : 0;
}

bool sdd_sm80_ungrouped(const SddParams& p) {
  const std::int64_t nnz = p.pattern.nnz_blocks, b = p.pattern.block_size;
  if (p.device.type != DeviceType::cuda || nnz <= 0 || !tc_dtype(p.dtype, p.fp32_math, p.device.index) ||
      !(b == 16 || b == 32 || b == 64 || b == 128) || p.a.cols >= (std::int64_t(1) << 31)) {
    return false;
  }
  const bool tf32 = p.dtype == DType::f32;
  if (tf32 && sdd_copy_bytes(p) != 0) return false;  // the wgmma kernel on copies where they pay
#if SPARSEKERN_BSR_SM90A
  if (sdd_16bit_sm90(p)) return false;
#endif
  return !sdd_grouped(tf32, nnz, int(b), p.device.index);
}

int sdd_row_sum_splits(const SddParams& p) {
  if (!sdd_sm80_ungrouped(p)) return 1;  // no kernel writes row partials
  const int splits = sdd_tc_splits(p.dtype == DType::f32, p.pattern.nnz_blocks, int(p.pattern.block_size),
                                   p.a.cols, p.device.index);
  return splits > 1 ? splits : 1;
}

bool dds_dense(const DdsProblem& p, cudaStream_t stream);

void dds_cuda(const DdsProblem& p, Stream stream_ptr) {
  const std::int64_t m = p.a.rows, n = p.c.cols;
  if (m == 0 || n == 0) return;
  sparsekern::detail::require_cuda_device(p.device.index);
  sparsekern::detail::DeviceGuard guard(p.device.index);
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  SK_EXPECTS(p.s.n_blocks <= INT_MAX / 128, "bsr: too many block columns (", p.s.n_blocks, ")");

  if (dds_dense(p, stream)) return;
  const std::int64_t vec = 16 / std::int64_t(dtype_size(p.dtype));
  const bool k_empty = p.s.k_blocks == 0;
  // C row-major (the dds case) or column-major (dsd computed as Cᵀ = Bᵀ·op(S)ᵀ).
  const bool c_row = tc_operand(p.c.data, p.c.col_stride, p.c.row_stride, m, vec);
  const bool c_col = !c_row && tc_operand(p.c.data, p.c.row_stride, p.c.col_stride, n, vec);
  const bool a_ok = k_empty || tc_operand(p.a.data, p.a.col_stride, p.a.row_stride, m, vec);
  const bool v_ok = p.s.nnz_blocks == 0 || aligned16(p.s.values);
  if (tc_dtype(p.dtype, p.fp32_math, p.device.index) && (c_row || c_col) && a_ok && v_ok) {
    tc::TcParams t;
    t.a = p.a.data;
    t.lda = m <= 1 ? vec : p.a.row_stride;
    t.c = p.c.data;
    t.c_col_major = c_col;
    t.ldc = c_col ? p.c.col_stride : (m <= 1 ? vec : p.c.row_stride);
    t.bias = p.bias;
    t.values = p.s.values;
    t.offsets = p.s.offsets;
    t.indices = p.s.indices;
    t.value_index = p.s.value_index;
    t.m = m;
    t.a_cols = p.s.k_blocks * p.s.block;
    t.nnz = p.s.nnz_blocks;
    t.block = int(p.s.block);
    t.bf16 = p.dtype == DType::bf16;
    t.schedule = schedule();  // sm90::set_schedule resolves it (static: the counter is not used)
    t.tile_counter = p.tile_counter;
    t.tma_store = tma_store_enabled();
    const int nb = int(p.s.n_blocks), b = int(p.s.block);
    bool bt = p.s.transposed_blocks;
    // tf32 with Bop = S (a linear layer's input gradient): wgmma reads tf32 blocks K-major only, so
    // the blocks are copied transposed into the caller's scratch first (value indices unchanged).
    if (p.dtype == DType::f32 && !bt && p.block_scratch != nullptr && !c_col && t.nnz > 0 &&
        tf32_wgmma(p.device.index, b)) {
      transpose_f32(p.s.values, t.nnz, b, b, b, std::int64_t(b) * b, p.block_scratch, b, std::int64_t(b) * b, stream);
      t.values = p.block_scratch;
      bt = true;
    }
    // sm_90a: 16-bit with b ∈ {32, 64, 128}; tf32 with K-major blocks (Bop = Sᵀ, or the copy above)
    // and b ∈ {64, 128}.
    const bool sm90_dtype = p.dtype != DType::f32 ? (b == 32 || b == 64 || b == 128)
                                                  : (bt && (b == 64 || b == 128));
    if (sm90_dtype && !c_col && sm90::built() && sm90_enabled() &&
        t.nnz > 0 && t.a_cols > 0 && m < (std::int64_t(1) << 31) && t.a_cols < (std::int64_t(1) << 31) &&
        t.nnz * b < (std::int64_t(1) << 31)) {
      const DeviceInfo dev = device_info(p.device.index);
      if (dev.major == 9 && dev.minor == 0) {  // sm_90a code runs on compute capability 9.0 only
        if (dds_sm90(t, nb, b, bt, p.dtype, dev.sms, stream)) return;
      }
    }
    if (p.dtype == DType::f32) {
      if (bt) dds_tc_launch<true, true>(t, nb, b, stream);
      else dds_tc_launch<true, false>(t, nb, b, stream);
    } else {
      if (bt) dds_tc_launch<false, true>(t, nb, b, stream);
      else dds_tc_launch<false, false>(t, nb, b, stream);
    }
    return;
  }
  dds_simt(p, stream);
}

/// The density (stored blocks × b² / (m · n)) from which an sdd on a compute capability 9.0 GPU
/// computes the whole product with cuBLAS and copies out the blocks (sdd_dense) by default: there
/// the sampled kernels are slower than the dense product they sample. Measured on an H100 (session
/// 14, tools/diag/bsr_sdd_dense.py: a weight gradient dYᵀ · X over 8192 rows, at 4096 → 4096 and
/// the BERT-base shapes 768 → 3072 and 3072 → 768, d = 0.05 … 0.75), the densities where the two
/// paths cross, by shape:
///   16-bit: b = 16 0.04 / ≤ 0.05 / ≤ 0.05 (the SM80 b = 16 kernel); b = 32 0.12 / below 0.05 /
///   below 0.05 (at these small shapes the sampled kernel does not get under ~55 µs); b = 64 0.34 /
///   0.41 / 0.38; b = 128 0.58 / 0.62 / 0.66.
///   TF32, with the dense path's smaller operand transposed first (session 22, s22_run7.sh,
///   benchmarks/results/bsr-sdd-dense-tf32-H100-2026-11-26-session22.txt; the dense path 764-792 µs
///   at 4096 → 4096 and 160-163 at both BERT-base shapes, against 1043-1051 and 193-275 before):
///   b = 16 0.057 at 4096 → 4096; b = 32 0.17 / ~0.23 / ~0.23; b = 64 0.31 / ~0.37 / ~0.37;
///   b = 128 0.56 / ~0.38 / ~0.38 (4096 → 4096 / 3072 → 768 / 768 → 3072, interpolated between
///   the measured densities). Session 14's TF32 crossings, before the copy: b = 16 0.07 / 0.16 /
///   0.19; b = 32 0.19 / 0.22 / 0.30; b = 64 0.40 / 0.27 / 0.48; b = 128 0.70 / 0.48 / above 0.75.
/// The thresholds sit near the largest shape's crossing, leaning to the others': where they
/// disagree, one path loses up to ~20% near the threshold (TF32 b = 128 at d = 0.5 on the BERT
/// shapes: the sampled kernels, ~25% slower there, keep the 4096 → 4096 cell, 709 vs 783 µs).
double sdd_dense_min_density(DType dtype, dense::Fp32Math math, std::int64_t b) {
  if (dtype == DType::f16 || dtype == DType::bf16) {
    switch (b) {
      case 16: return 0.04;
      case 32: return 0.15;
      case 64: return 0.4;
      default: return 0.65;
    }
  }
  if (dtype == DType::f32 && math == dense::Fp32Math::tf32) {
    switch (b) {
      case 16: return 0.08;
      case 32: return 0.18;
      case 64: return 0.33;
      default: return 0.55;
    }
  }
  return 2.0;  // fp32 without TF32, fp64: not measured
}

/// TF32 on the dense path: cuBLAS's TF32 kernels on Hopper read K-major operands, and a weight
/// gradient's operands (dYᵀ M-major, X N-major) are neither; measured (H100, session 22,
/// tools/diag/tf32_gemm_layouts.py, 4096 × 4096 × 8192): 1050 µs as given, 724 with B K-major,
/// 755 with A K-major, 708 with both. So the dense path first transposes the smaller operand into
/// the workspace (round256(min(m, n) · k₄ · 4) bytes, k₄ = k rounded up to a multiple of 4) where
/// the workspace has room for it; 0 for other dtypes.
std::size_t sdd_dense_copy_bytes(const SddParams& p) {
  if (p.dtype != DType::f32 || p.fp32_math != dense::Fp32Math::tf32) return 0;
  const std::int64_t k4 = (p.a.cols + 3) / 4 * 4;
  return dense_matrix_bytes(std::min(p.a.rows, p.b.cols), k4, DType::f32);
}

std::size_t sdd_dense_bytes(const SddParams& p) {
  const std::int64_t m = p.a.rows, k = p.a.cols, n = p.b.cols, b = p.pattern.block_size;
  const int mode = sdd_dense_mode();
  if (p.device.type != DeviceType::cuda || mode == 0 || m <= 0 || k <= 0 || n <= 0 || b <= 0 ||
      p.pattern.nnz_blocks <= 0 || p.pattern.nnz_blocks > INT_MAX || m > INT_MAX || n > INT_MAX || k > INT_MAX) {
    return 0;
  }
  if (mode < 0) {
    const DeviceInfo dev = device_info(p.device.index);
    if (dev.major != 9 || dev.minor != 0) return 0;  // measured on H100 only
    const double density = double(p.pattern.nnz_blocks) * double(b * b) / (double(m) * double(n));
    if (density < sdd_dense_min_density(p.dtype, p.fp32_math, b)) return 0;
  }
  const std::size_t c = dense_matrix_bytes(m, n, p.dtype);
  return c + sdd_dense_copy_bytes(p) + dense::gemm_workspace_size(p.device);
}

/// The sdd as one dense product C = A · B (cuBLAS, into the caller's workspace) and a copy of the
/// pattern's blocks out of C. False (nothing launched) where it does not apply: no or a too small
/// workspace, operands cuBLAS cannot read, an unaligned output.
bool sdd_dense(const SddParams& p, cudaStream_t stream) {
  const std::size_t full = sdd_dense_bytes(p);
  const std::size_t copy_bytes = full == 0 ? 0 : sdd_dense_copy_bytes(p);
  // 256-byte alignment: cuBLAS's workspace follows C (and the copy) at a multiple of 256 bytes.
  // Without room for the TF32 copy the product runs on the operands as given.
  if (full == 0 || p.workspace.data == nullptr || p.workspace.bytes < full - copy_bytes ||
      !aligned16(p.out_values) || (reinterpret_cast<std::uintptr_t>(p.workspace.data) & 255) != 0) {
    return false;
  }
  const std::int64_t m = p.a.rows, n = p.b.cols, b = p.pattern.block_size;
  const std::int64_t es = std::int64_t(dtype_size(p.dtype));
  if ((b * es) % 16 != 0) return false;
  auto blas_ok = [](const MatrixView& v) {
    return (v.col_stride == 1 && v.row_stride >= v.cols) || (v.row_stride == 1 && v.col_stride >= v.rows) ||
           v.rows <= 1 || v.cols <= 1;
  };
  if (!blas_ok(p.a) || !blas_ok(p.b)) return false;
  const std::size_t c_bytes = dense_matrix_bytes(m, n, p.dtype);
  char* ws = static_cast<char*>(p.workspace.data);
  dense::GemmParams g;
  g.dtype = p.dtype;
  g.device = p.device;
  g.a = p.a;
  g.b = p.b;
  std::size_t used = c_bytes;
  const std::int64_t k = p.a.cols;
  const bool a_mmajor = p.a.row_stride == 1 && m > 1 && k > 1;
  const bool b_nmajor = p.b.col_stride == 1 && n > 1 && k > 1;
  if (copy_bytes != 0 && p.workspace.bytes >= full && a_mmajor && b_nmajor) {
    // TF32: the smaller operand K-major (see sdd_dense_copy_bytes); B on a tie (measured faster).
    const std::int64_t k4 = (k + 3) / 4 * 4;
    char* copy = ws + c_bytes;
    if (n <= m) {  // B (k × n, row stride ldb) → n × k row-major: B column-major
      transpose_f32(p.b.data, 1, k, n, p.b.row_stride, 0, copy, k4, 0, stream);
      g.b = MatrixView{copy, k, n, 1, k4, 0};
    } else {  // A column-major: its memory is Aᵀ (k × m, row stride col_stride) → A row-major
      transpose_f32(p.a.data, 1, k, m, p.a.col_stride, 0, copy, k4, 0, stream);
      g.a = MatrixView{copy, m, k, k4, 1, 0};
    }
    used += copy_bytes;
  }
  g.c = MutableMatrixView{ws, m, n, n, 1, 0};
  g.fp32_math = p.fp32_math;
  // The sampled kernels accumulate each block in fp32 and round once; so does this product.
  g.allow_reduced_precision_reduction = false;
  g.workspace = Workspace{ws + used, p.workspace.bytes - used};
  dense::gemm(g, stream);
  GatherArgs a{ws, n * es, static_cast<char*>(p.out_values), p.pattern.block_row_indices,
               p.pattern.block_col_indices, int(b * es), int(b), p.pattern.nnz_blocks};
  const std::int64_t vectors = p.pattern.nnz_blocks * b * b * es / 16;
  const int sms = device_info(p.device.index).sms;
  gather_blocks_kernel<<<unsigned(std::min<std::int64_t>((vectors + 255) / 256, 16 * sms)), 256, 0, stream>>>(a);
  SK_CUDA_CHECK_LAUNCH();
  return true;
}

/// The density from which a dds on a compute capability 9.0 GPU writes Bop dense and multiplies
/// with cuBLAS by default, for m ≥ 4096 rows of A (`many`) or 1024 ≤ m < 4096; below 1024 rows
/// never (few rows make the product bound by reading Bop, which the block-sparse kernels read only
/// where it has blocks). Measured on an H100 (tools/diag/bsr_dds_dense.py: a linear layer's
/// forward X · Wᵀ + bias, and its input gradient dY · W, which crosses lower), the forward's
/// crossings with the final dense path (session 14, s14_run13):
///   16-bit, 8192 rows: b = 16 0.077 (4096 → 4096) / 0.077 (3072 → 768) / 0.12 (768 → 3072);
///   b = 32 0.31 / 0.30 / 0.43; 1024 rows (4096 → 4096): b = 16 0.10, b = 32 0.43.
///   TF32, 8192 rows: b = 16 0.19 / 0.21 / 0.28; b = 32 0.34 / 0.38 / 0.40; 1024 rows: b = 16
///   0.25, b = 32 0.46.
/// Blocks of 64 and 128: the block-sparse kernels won everywhere measured (up to d = 0.75, 0.61 at
/// 3072 → 768 for b = 64 in 16 bits; session 14, s14_run2). Where the shapes disagree the
/// thresholds sit between them: one path loses up to ~15% near a threshold.
double dds_dense_min_density(DType dtype, dense::Fp32Math math, std::int64_t b, bool many) {
  if (dtype == DType::f16 || dtype == DType::bf16) {
    if (b == 16) return 0.12;
    if (b == 32) return many ? 0.35 : 0.45;
    return 2.0;
  }
  if (dtype == DType::f32 && math == dense::Fp32Math::tf32) {
    if (b == 16) return many ? 0.25 : 0.3;
    if (b == 32) return many ? 0.38 : 0.5;
    return 2.0;
  }
  return 2.0;  // fp32 without TF32, fp64: not measured
}
constexpr std::int64_t kDdsDenseMinRows = 1024, kDdsDenseManyRows = 4096;

std::size_t dds_dense_bytes(const DdsParams& p) {
  const int mode = dds_dense_mode();
  const std::int64_t b = p.s.block_size, nnz = p.s.nnz_blocks, m = p.a.rows;
  const std::int64_t k = p.transpose_s ? p.s.cols : p.s.rows, n = p.transpose_s ? p.s.rows : p.s.cols;
  const bool tc = p.dtype == DType::f16 || p.dtype == DType::bf16 ||
                  (p.dtype == DType::f32 && p.fp32_math == dense::Fp32Math::tf32);
  if (p.device.type != DeviceType::cuda || mode == 0 || !tc || b <= 0 || nnz <= 0 || m <= 0 || k <= 0 || n <= 0 ||
      nnz > INT_MAX || m > INT_MAX || k > INT_MAX || n > INT_MAX || n / b > INT_MAX) {
    return 0;
  }
  if (mode < 0) {
    const DeviceInfo dev = device_info(p.device.index);
    if (dev.major != 9 || dev.minor != 0) return 0;  // measured on H100 only
    const double density = double(nnz) * double(b * b) / (double(k) * double(n));
    if (m < kDdsDenseMinRows || density < dds_dense_min_density(p.dtype, p.fp32_math, b, m >= kDdsDenseManyRows)) {
      return 0;
    }
  }
  return kDdsScratchOffset + dense_matrix_bytes(k, n, p.dtype) + dense::gemm_workspace_size(p.device);
}

/// The dds as Bop written dense into the scratch (zeros, then the blocks) and one cuBLAS product
/// C = A · Bop, with the bias written into C first and accumulated. False (nothing launched) where
/// it does not apply: no scratch, C not row-major, A not readable by cuBLAS.
bool dds_dense(const DdsProblem& p, cudaStream_t stream) {
  if (p.dense_scratch == nullptr) return false;
  const std::int64_t m = p.a.rows, n = p.c.cols, b = p.s.block, k = p.s.k_blocks * b;
  const std::int64_t es = std::int64_t(dtype_size(p.dtype));
  const bool c_row = m <= 1 || (p.c.col_stride == 1 && p.c.row_stride >= n);
  const bool a_ok = (p.a.col_stride == 1 && p.a.row_stride >= k) || (p.a.row_stride == 1 && p.a.col_stride >= m) ||
                    m <= 1 || k <= 1;
  const std::size_t d_bytes = dense_matrix_bytes(k, n, p.dtype);
  if (!c_row || !a_ok || p.dense_scratch_bytes < d_bytes || p.s.nnz_blocks > INT_MAX) return false;
  char* ws = static_cast<char*>(p.dense_scratch);
  SK_CUDA_TRY(cudaMemsetAsync(ws, 0, std::size_t(k * n * es), stream));
  if (p.s.nnz_blocks > 0) {
    ScatterArgs a{p.s.values, p.s.offsets, p.s.indices, p.s.value_index, ws, n, int(b), p.s.transposed_blocks,
                  aligned16(p.s.values) && (b * es) % 16 == 0 && (n * es) % 16 == 0};
    // About 8 CTAs per SM in all, spread over the block columns' entries (no host sync: the
    // entries per column are not known here).
    const int sms = device_info(p.device.index).sms;
    const dim3 grid(unsigned(p.s.n_blocks), unsigned(std::max<std::int64_t>(1, std::min<std::int64_t>(
                                                 65535, (8 * sms + p.s.n_blocks - 1) / p.s.n_blocks))));
    if (es == 2) scatter_blocks_kernel<std::uint16_t><<<grid, 256, 0, stream>>>(a);
    else if (es == 4) scatter_blocks_kernel<std::uint32_t><<<grid, 256, 0, stream>>>(a);
    else scatter_blocks_kernel<std::uint64_t><<<grid, 256, 0, stream>>>(a);
    SK_CUDA_CHECK_LAUNCH();
  }
  const std::int64_t ldc = m <= 1 ? n : p.c.row_stride;
  // The bias: written into C before cuBLAS accumulates into it (beta = 1) in 16 bits; added after
  // a beta = 0 product with fp32 operands, where cuBLAS's SGEMM (TF32) with beta = 1 cost ~180 µs
  // more than without at 8192 × 4096 → 4096 (H200), several times the traffic of C.
  const bool post_add = p.bias != nullptr && p.dtype == DType::f32;
  const unsigned fill_grid =
      unsigned(std::min<std::int64_t>((m * n + 255) / 256, 16LL * device_info(p.device.index).sms));
  if (p.bias != nullptr && !post_add) {
    const unsigned grid = fill_grid;
    if ((n * es) % 16 == 0 && (ldc * es) % 16 == 0 && aligned16(p.c.data) && aligned16(p.bias)) {
      fill_rows_kernel<int4><<<grid, 256, 0, stream>>>(static_cast<int4*>(p.c.data), ldc * es / 16,
                                                       static_cast<const int4*>(p.bias), m, n * es / 16);
    } else if (es == 2) {
      fill_rows_kernel<std::uint16_t><<<grid, 256, 0, stream>>>(static_cast<std::uint16_t*>(p.c.data), ldc,
                                                                static_cast<const std::uint16_t*>(p.bias), m, n);
    } else if (es == 4) {
      fill_rows_kernel<std::uint32_t><<<grid, 256, 0, stream>>>(static_cast<std::uint32_t*>(p.c.data), ldc,
                                                                static_cast<const std::uint32_t*>(p.bias), m, n);
    } else {
      fill_rows_kernel<std::uint64_t><<<grid, 256, 0, stream>>>(static_cast<std::uint64_t*>(p.c.data), ldc,
                                                                static_cast<const std::uint64_t*>(p.bias), m, n);
    }
    SK_CUDA_CHECK_LAUNCH();
  }
  dense::GemmParams g;
  g.dtype = p.dtype;
  g.device = p.device;
  g.a = p.a;
  g.b = MatrixView{ws, k, n, n, 1, 0};
  g.c = MutableMatrixView{p.c.data, m, n, ldc, 1, 0};
  g.beta = p.bias != nullptr && !post_add ? 1.0 : 0.0;
  g.fp32_math = p.fp32_math;
  g.allow_reduced_precision_reduction = false;  // like the block-sparse kernels: fp32 sums, one rounding
  g.workspace = Workspace{ws + d_bytes, p.dense_scratch_bytes - d_bytes};
  dense::gemm(g, stream);
  if (post_add) {
    const bool vec = n % 4 == 0 && ldc % 4 == 0 && aligned16(p.c.data) && aligned16(p.bias);
    add_rows_f32_kernel<<<fill_grid, 256, 0, stream>>>(static_cast<float*>(p.c.data), ldc,
                                                       static_cast<const float*>(p.bias), m, n, vec);
    SK_CUDA_CHECK_LAUNCH();
  }
  return true;
}

/// SPARSEKERN_BSR_SDD_TM=auto | 64 | 128 (read once per process): rows per consumer tile of the
/// tf32 sdd with blocks of 128 (128: the whole block). auto: whole blocks from 1.5 blocks per SM.
/// Measured (H100, K-major operands over 8192 rows, kernel µs, 64-row tiles vs whole blocks;
/// session 14, tools/diag/bsr_sdd_tm.py): 4096 → 4096 at 51 / 102 / 256 / 512 / 768 blocks 104 vs
/// 138, 149 vs 146, 290 vs 246, 578 vs 498, 855 vs 766; the BERT-base shapes (7-108 blocks) 76-129
/// vs 105-130. Fewer tiles than consumers leave SMs idle; past that, each k-slice of B loaded once
/// per block instead of twice wins.
constexpr double kSddWholeBlocksPerSm = 1.5;
bool sdd_whole_blocks(int nnz, int sms) {
  static const int mode = [] {
    const char* v = std::getenv("SPARSEKERN_BSR_SDD_TM");
    if (v == nullptr || *v == '\0' || std::strcmp(v, "auto") == 0) return 0;
    if (std::strcmp(v, "64") == 0) return 64;
    if (std::strcmp(v, "128") == 0) return 128;
    throw InvalidArgument(std::string("SPARSEKERN_BSR_SDD_TM must be auto, 64 or 128; got '") + v + "'");
  }();
  if (mode != 0) return mode == 128;
  return double(nnz) >= kSddWholeBlocksPerSm * double(sms);
}

#if SPARSEKERN_BSR_SM90A
/// tf32 sdd on the sm_90a wgmma kernel, which reads tf32 K-major only: A (m × k) row-major and B
/// (k × n) column-major as given, or copied so from the usual weight-gradient layouts (A
/// column-major, B row-major) into the caller's workspace. False (nothing launched) where it does
/// not apply: not tf32 on Hopper, other layouts, no workspace for the copies, a refused TMA
/// descriptor.
bool sdd_tf32_sm90(const SddParams& p, cudaStream_t stream) {
  const std::int64_t m = p.a.rows, k = p.a.cols, n = p.b.cols, b = p.pattern.block_size;
  if (p.dtype != DType::f32 || p.fp32_math != dense::Fp32Math::tf32 || k <= 0 || !aligned16(p.out_values) ||
      m >= (std::int64_t(1) << 31) || n >= (std::int64_t(1) << 31) || k >= (std::int64_t(1) << 31) ||
      !tf32_wgmma(p.device.index, b)) {
    return false;
  }
  constexpr std::int64_t vec = 4;
  const bool a_kmajor = tc_operand(p.a.data, p.a.col_stride, p.a.row_stride, m, vec);
  const bool b_kmajor = tc_operand(p.b.data, p.b.row_stride, p.b.col_stride, n, vec);
  const bool a_mmajor = !a_kmajor && p.a.row_stride == 1;
  const bool b_nmajor = !b_kmajor && p.b.col_stride == 1;
  if (!(a_kmajor || a_mmajor) || !(b_kmajor || b_nmajor)) return false;
  const void* a = p.a.data;
  const void* bm = p.b.data;
  std::int64_t lda = m <= 1 ? vec : p.a.row_stride, ldb = n <= 1 ? vec : p.b.col_stride;
  if (!a_kmajor || !b_kmajor) {
    const std::size_t need = sdd_copy_bytes(p);  // 0: the copies would not pay
    if (need == 0 || p.workspace.data == nullptr || p.workspace.bytes < need) return false;
    const SddCopies c = sdd_copies(m, k, n);
    char* ws = static_cast<char*>(p.workspace.data);
    if (!a_kmajor) {  // A column-major: its memory is Aᵀ (k × m, row stride col_stride)
      transpose_f32(p.a.data, 1, k, m, p.a.col_stride, 0, ws, c.ldk, 0, stream);
      a = ws;
      lda = c.ldk;
    }
    if (!b_kmajor) {  // B row-major (k × n): its transpose, n × k row-major, is B column-major
      transpose_f32(p.b.data, 1, k, n, p.b.row_stride, 0, ws + c.b_offset, c.ldk, 0, stream);
      bm = ws + c.b_offset;
      ldb = c.ldk;
    }
  }
  tc::TcParams t;
  t.a = a;
  t.lda = lda;
  t.b = bm;
  t.ldb = ldb;
  t.out_values = p.out_values;
  t.block_rows = p.pattern.block_row_indices;
  t.block_cols = p.pattern.block_col_indices;
  t.k = int(k);
  t.block = int(b);
  const int nnz = int(p.pattern.nnz_blocks), sms = device_info(p.device.index).sms;
  if (b == 64) return sm90::sdd_launch<sm90::Elem::tf32, 64, true>(t, nnz, int(m), int(n), sms, stream);
  if (sdd_whole_blocks(nnz, sms)) return sm90::sdd_launch<sm90::Elem::tf32, 128, true, 128>(t, nnz, int(m), int(n), sms, stream);
  return sm90::sdd_launch<sm90::Elem::tf32, 128, true>(t, nnz, int(m), int(n), sms, stream);
}
#endif

namespace {

/// The product of sdd_cuda (nnz_blocks > 0). With `row_partial` (a_row_sums asked for, room for
/// `row_splits` splits), the SM80 kernel also sums the rows of A that its block rows' first
/// blocks load; returns the number of splits whose row partials it wrote (0: none, the finish pass
/// sums every row from A), which can be fewer than row_splits (no room for the split-K partials).
int sdd_products(const SddParams& p, cudaStream_t stream, float* row_partial, int row_splits) {
  const std::int64_t vec = 16 / std::int64_t(dtype_size(p.dtype));
  const std::int64_t k = p.a.cols;
  if (sdd_dense(p, stream)) return 0;
#if SPARSEKERN_BSR_SM90A
  if (sdd_tf32_sm90(p, stream)) return 0;
#endif
  // A column-major (M-major) and B row-major (N-major): the layouts of Xᵀ and dY in a weight
  // gradient, read without copies.
  const bool a_ok = k == 0 || tc_operand(p.a.data, p.a.row_stride, p.a.col_stride, k, vec);
  const bool b_ok = k == 0 || tc_operand(p.b.data, p.b.col_stride, p.b.row_stride, k, vec);
  if (tc_dtype(p.dtype, p.fp32_math, p.device.index) && a_ok && b_ok && aligned16(p.out_values)) {
    tc::TcParams t;
    t.a = p.a.data;
    t.lda = k <= 1 ? vec : p.a.col_stride;
    t.b = p.b.data;
    t.ldb = k <= 1 ? vec : p.b.row_stride;
    t.out_values = p.out_values;
    t.block_rows = p.pattern.block_row_indices;
    t.block_cols = p.pattern.block_col_indices;
    t.k = int(k);
    t.block = int(p.pattern.block_size);
    t.bf16 = p.dtype == DType::bf16;
    t.nnz = p.pattern.nnz_blocks;  // the grouped kernel stops its groups there
    const int nnz = int(p.pattern.nnz_blocks), b = int(p.pattern.block_size);
#if SPARSEKERN_BSR_SM90A
    if (sdd_16bit_sm90(p)) {  // sm_90a code runs on compute capability 9.0 only
      const int rows = int(p.a.rows), cols = int(p.b.cols), sms = device_info(p.device.index).sms;
      // Split K where the caller passed room for the partials (sdd_workspace_bytes).
      int splits = sdd_splits(nnz, b, k, sms);
      float* partial = split_partials(p, splits, nnz, b);
      if (partial == nullptr) splits = 1;
      bool launched;
      if (b == 64) {
        launched = t.bf16 ? sm90::sdd_launch<sm90::Elem::bf16, 64, false>(t, nnz, rows, cols, sms, stream, splits, partial)
                          : sm90::sdd_launch<sm90::Elem::f16, 64, false>(t, nnz, rows, cols, sms, stream, splits, partial);
      } else {
        launched = t.bf16 ? sm90::sdd_launch<sm90::Elem::bf16, 128, false>(t, nnz, rows, cols, sms, stream, splits, partial)
                          : sm90::sdd_launch<sm90::Elem::f16, 128, false>(t, nnz, rows, cols, sms, stream, splits, partial);
      }
      if (launched) return 0;  // else a TMA descriptor was refused: the SM80 kernel below
    }
#endif
    // Split K where the caller passed room for the partials (sdd_workspace_bytes).
    int splits = sdd_tc_splits(p.dtype == DType::f32, nnz, b, k, p.device.index);
    if (float* partial = split_partials(p, splits, nnz, b)) {
      t.split_steps = sdd_tc_split_steps(k, splits);
      t.splits = splits;
      t.partial = partial;
    }
    // The fused row sums: the one-tile-per-CTA kernel only (not the grouped one).
    const bool fused = row_partial != nullptr && t.splits <= row_splits &&
                       !sdd_grouped(p.dtype == DType::f32, nnz, b, p.device.index);
    if (fused) {
      t.row_partial = row_partial;
      t.block_row_offsets = p.pattern.block_row_offsets;
      t.row_stride = p.a.rows;
    }
    if (p.dtype == DType::f32) sdd_tc_launch<true>(t, nnz, b, p.device.index, stream);
    else sdd_tc_launch<false>(t, nnz, b, p.device.index, stream);
    return fused ? t.splits : 0;
  }
  sdd_simt(p, stream);
  return 0;
}

}  // namespace

void sdd_cuda(const SddParams& p, Stream stream_ptr) {
  if (p.pattern.nnz_blocks == 0 && p.a_row_sums == nullptr) return;
  sparsekern::detail::require_cuda_device(p.device.index);
  sparsekern::detail::DeviceGuard guard(p.device.index);
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  RowSumsLayout rl;
  float* row_partial = nullptr;
  if (p.a_row_sums != nullptr) {
    rl = row_sums_layout(p.a.rows, p.a.cols, sdd_row_sum_splits(p));
    row_partial = static_cast<float*>(p.row_sums_workspace.data);
  }
  const int fused_splits = p.pattern.nnz_blocks > 0 ? sdd_products(p, stream, row_partial, rl.splits) : 0;
  if (p.a_row_sums != nullptr) {
    if (fused_splits > 0) rl.splits = fused_splits;  // the splits whose partials were written
    sdd_row_sums_finish(p, rl, fused_splits > 0, stream);
  }
}

}  // namespace sparsekern::bsr::detail
