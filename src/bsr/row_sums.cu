// The row sums of an sdd's first operand (SddParams::a_row_sums: a linear layer's bias gradient,
// Σ over the tokens of ∂ℓ/∂y, next to its weight gradient): the pass that finishes them.
//
// The SM80 sdd kernel sums the rows of the block rows that hold a block from the A tiles it loads
// anyway (tc/kernel.cuh, sdd_body) and leaves per-lane, per-split fp32 partials; this pass adds
// those up in a fixed order. Rows it did not cover (empty block rows, or every row when another
// kernel ran the product) are summed here from `a`: a grid of (group of 128 rows) × (chunk of k,
// at least 128 lines, at most 64 chunks), each CTA's eight warps striding over the chunk's lines
// with 16-byte loads (8 in flight per lane) where the rows are contiguous, its partial written to
// the workspace; the group's last CTA to finish (a counter per group) adds the chunks up in chunk
// order. Deterministic: no order depends on scheduling.
//
// Measured (H100, 8192-row layers, kernel µs, tools/diag/bsr_rowsum_kernels.py, session 23): the
// pass alone, as the unfused paths run it over a bf16 ∂ℓ/∂yᵀ of 4096 × 8192, 28.8 against 27.6
// for cuBLAS's GEMV against a ones vector; behind the fused kernel with every block row covered
// 3.3 (the CTAs of covered groups return at once).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <type_traits>

#include "../common/cuda_check.h"
#include "bsr_internal.h"
#include "device_types.cuh"

namespace sparsekern::bsr::detail {

namespace {

constexpr int kWarps = 8;

template <class T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <class T>
__device__ __forceinline__ Acc<T> load_acc(const T* p) {
  return Acc<T>(*p);
}

/// Four consecutive elements (16-byte aligned for fp32, 8-byte for 16-bit) as accumulators.
template <class T>
__device__ __forceinline__ void load4(const T* p, Acc<T> (&v)[4]) {
  if constexpr (std::is_same_v<T, float>) {
    const float4 q = __ldg(reinterpret_cast<const float4*>(p));
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
  } else if constexpr (sizeof(T) == 2) {
    const uint2 q = __ldg(reinterpret_cast<const uint2*>(p));
    const T* h = reinterpret_cast<const T*>(&q);
    for (int e = 0; e < 4; ++e) v[e] = load_acc(h + e);
  } else {
    for (int e = 0; e < 4; ++e) v[e] = load_acc(p + e);
  }
}

template <class T>
__device__ __forceinline__ T from_acc(Acc<T> x) {
  if constexpr (std::is_same_v<T, __half>) return __float2half_rn(x);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float2bfloat16_rn(x);
  else return T(x);
}

struct RowSumArgs {
  const void* a;
  std::int64_t rs, cs;  // strides of a: element (i, j) at a[i · rs + j · cs]
  std::int64_t m, k;
  int chunk_lines, chunks, splits, block;
  const float* fused;                   // [split][row][4] (null: nothing fused)
  const std::int32_t* row_offsets;      // the pattern's block rows (with fused)
  float* chunk_partial;                 // [chunk][row]
  int* counters;                        // [group], zero on entry
  void* out;
};

/// Whether row i's block row holds a block (its sum then comes from the fused partials).
__device__ __forceinline__ bool covered(const RowSumArgs& p, std::int64_t i) {
  if (p.fused == nullptr) return false;
  const std::int64_t r = i / p.block;
  return p.row_offsets[r + 1] > p.row_offsets[r];
}

/// A covered row's sum: its fused partials, splits in order, each split's four lanes pairwise.
__device__ __forceinline__ float fused_sum(const RowSumArgs& p, std::int64_t row) {
  float s = 0.0f;
  for (int sp = 0; sp < p.splits; ++sp) {
    const float* q = p.fused + (std::int64_t(sp) * p.m + row) * 4;
    s += (q[0] + q[1]) + (q[2] + q[3]);
  }
  return s;
}

template <class T>
__global__ void __launch_bounds__(32 * kWarps) row_sums_kernel(const RowSumArgs p) {
  using A = Acc<T>;
  __shared__ A part[kWarps][kRowSumGroup];
  __shared__ int last;
  const std::int64_t g0 = std::int64_t(blockIdx.x) * kRowSumGroup;
  const int rows = int(p.m - g0 < kRowSumGroup ? p.m - g0 : kRowSumGroup);
  const int chunk = int(blockIdx.y);
  const int tid = int(threadIdx.x), warp = tid / 32, lane = tid % 32;

  // Does any row of the group need the column sums? (uniform across the CTA)
  bool need = p.fused == nullptr;
  if (!need) {
    const std::int64_t r_end = (g0 + rows - 1) / p.block;
    for (std::int64_t r = g0 / p.block; r <= r_end && !need; ++r) need = p.row_offsets[r + 1] == p.row_offsets[r];
  }
  if (!need) {  // every row fused: chunk 0 adds the partials up, in split then lane order
    if (chunk != 0) return;
    for (int i = tid; i < rows; i += blockDim.x) static_cast<T*>(p.out)[g0 + i] = from_acc<T>(A(fused_sum(p, g0 + i)));
    return;
  }

  // This chunk's lines, strided over the warps; lane l sums rows 4l … 4l + 3 of the group.
  const std::int64_t j0 = std::int64_t(chunk) * p.chunk_lines;
  const std::int64_t j1 = j0 + p.chunk_lines < p.k ? j0 + p.chunk_lines : p.k;
  const T* a = static_cast<const T*>(p.a);
  A s[4] = {A(0), A(0), A(0), A(0)};
  const int r4 = lane * 4;
  const std::size_t vec_bytes = sizeof(T) * 4 <= 16 ? sizeof(T) * 4 : 16;
  const bool vec = p.rs == 1 && r4 + 4 <= rows && sizeof(T) <= 4 &&
                   (reinterpret_cast<std::uintptr_t>(a + g0 + r4) % vec_bytes) == 0 && (p.cs * sizeof(T)) % vec_bytes == 0;
  if (vec) {
    const T* base = a + g0 + r4;
#pragma unroll 8
    for (std::int64_t j = j0 + warp; j < j1; j += kWarps) {
      A v[4];
      load4(base + j * p.cs, v);
      for (int e = 0; e < 4; ++e) s[e] += v[e];
    }
  } else {
    for (std::int64_t j = j0 + warp; j < j1; j += kWarps) {
      for (int e = 0; e < 4; ++e)
        if (r4 + e < rows) s[e] += load_acc(a + (g0 + r4 + e) * p.rs + j * p.cs);
    }
  }
  for (int e = 0; e < 4; ++e) part[warp][r4 + e] = s[e];
  __syncthreads();
  // The chunk's sum per row (warps in order) into the workspace, as fp32 (fp64 data: the pass runs
  // with one chunk, see sdd_row_sums_finish, and writes the result directly).
  if (p.chunks == 1) {
    for (int i = tid; i < rows; i += blockDim.x) {
      const std::int64_t row = g0 + i;
      if (covered(p, row)) continue;
      A t = A(0);
      for (int w = 0; w < kWarps; ++w) t += part[w][i];
      static_cast<T*>(p.out)[row] = from_acc<T>(t);
    }
    if (p.fused == nullptr) return;
  } else {
    for (int i = tid; i < rows; i += blockDim.x) {
      float t = 0.0f;
      for (int w = 0; w < kWarps; ++w) t += float(part[w][i]);
      p.chunk_partial[std::int64_t(chunk) * p.m + g0 + i] = t;
    }
    __threadfence();  // the partials before the counter (the classic last-block reduction)
    __syncthreads();
    if (tid == 0) last = atomicAdd(p.counters + blockIdx.x, 1) == p.chunks - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
  }
  // The group's last CTA (or the only one): every row's final value, chunks in order.
  for (int i = tid; i < rows; i += blockDim.x) {
    const std::int64_t row = g0 + i;
    float t = 0.0f;
    if (covered(p, row)) {
      t = fused_sum(p, row);
    } else if (p.chunks > 1) {
      for (int c = 0; c < p.chunks; ++c) t += __ldcg(p.chunk_partial + std::int64_t(c) * p.m + row);
    } else {
      continue;  // written above
    }
    static_cast<T*>(p.out)[row] = from_acc<T>(A(t));
  }
}

}  // namespace

void sdd_row_sums_finish(const SddParams& p, const RowSumsLayout& l, bool fused, void* stream) {
  const std::int64_t m = p.a.rows;
  if (m <= 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  char* ws = static_cast<char*>(p.row_sums_workspace.data);
  RowSumArgs a{};
  a.a = p.a.data;
  a.rs = p.a.row_stride;
  a.cs = p.a.col_stride;
  a.m = m;
  a.k = p.a.cols;
  a.chunk_lines = l.chunk_lines;
  a.chunks = l.chunks;
  a.splits = l.splits;
  a.block = int(p.pattern.block_size);
  a.fused = fused ? reinterpret_cast<const float*>(ws) : nullptr;
  a.row_offsets = p.pattern.block_row_offsets;
  a.chunk_partial = reinterpret_cast<float*>(ws + l.chunk_off);
  a.counters = reinterpret_cast<int*>(ws + l.counter_off);
  a.out = p.a_row_sums;
  if (p.dtype == DType::f64) {  // fp64 sums stay fp64: one chunk per group (no fp32 partials)
    a.chunks = 1;
    a.chunk_lines = int(p.a.cols > 0 ? p.a.cols : 1);
  }
  if (a.chunks > 1) SK_CUDA_TRY(cudaMemsetAsync(a.counters, 0, std::size_t(l.groups) * sizeof(int), s));
  const dim3 grid(unsigned(l.groups), unsigned(a.chunks));
  with_device_type(p.dtype, [&](auto t) { row_sums_kernel<decltype(t)><<<grid, 32 * kWarps, 0, s>>>(a); });
  SK_CUDA_CHECK_LAUNCH();
}

}  // namespace sparsekern::bsr::detail
