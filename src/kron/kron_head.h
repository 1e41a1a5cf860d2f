#pragma once
// Mode 0 of the natural-order split (kron_plan.cpp: plan_natural_tail) as one pass over the data, the
// per-thread program shared by the CUDA kernel (kron_head_f32.cu) and the CPU backend: for every
// row m of the state (p × L floats, row-major) and every column l,
//   out[m, j, l] = Σ_i A[i, j] · in[m, i, l]      (j < q; A is p × q, given by strides)
// which is the split's forward head (A = F₀) and the pulled-back gradient of its backward
// (A = F₀ᵀ). A thread owns four consecutive columns of one row: it reads the p inputs of its
// columns (16-byte vectors where allowed), then writes each output j as it completes, so its
// registers hold 4p inputs and 4 sums; A sits in shared memory (read as broadcasts). The loads of
// a warp are 32 consecutive 16-byte vectors of one input row: full sectors, like the stores.
// The default for heads of p, q ≤ 8 (measured faster than cuBLAS's strided-batched GEMMs there; see
// head_pass_max in kron_plan.cpp); SPARSEKERN_KRON_HEAD=kernel takes it up to 32, =gemm never.

#include "kron_fast.h"
#include "kron_internal.h"
#include "kron_tile.h"

namespace sparsekern::kron::detail {

/// The most rows p (and columns q) of A the head program takes (its 4p input registers).
constexpr int kHeadMaxP = 32;

/// Chunk c (of M · L / 4): four columns of one row. A in shared memory (`sa`, a[i·q + j]).
/// PM ≥ p, a compile-time bound (8, 16 or 32), so that the inputs stay in registers.
template <int PM>
SK_KRON_FN void head_chunk(const HeadArgs& h, const float* sa, long long c) {
  const long long per_row = h.L >> 2;
  const long long m = c / per_row;
  const long long l = (c - m * per_row) << 2;
  const float* const x = h.x + m * h.ldx + l;
  float* const y = h.y + m * h.ldy + l;
  float v[PM][4];
  SK_KRON_UNROLL
  for (int i = 0; i < PM; ++i) {
    if (i < h.p) {
      const float* src = x + i * h.L;
#if defined(__CUDA_ARCH__)
      if (h.vec != 0) {
        const float4 t = __ldg(reinterpret_cast<const float4*>(src));
        v[i][0] = t.x; v[i][1] = t.y; v[i][2] = t.z; v[i][3] = t.w;
        continue;
      }
#endif
      v[i][0] = src[0]; v[i][1] = src[1]; v[i][2] = src[2]; v[i][3] = src[3];
    } else {
      v[i][0] = v[i][1] = v[i][2] = v[i][3] = 0.0f;
    }
  }
  for (int j = 0; j < h.q; ++j) {
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    SK_KRON_UNROLL
    for (int i = 0; i < PM; ++i) {
      if (i < h.p) {
        const float a = sa[i * h.q + j];
        s0 += a * v[i][0]; s1 += a * v[i][1]; s2 += a * v[i][2]; s3 += a * v[i][3];
      }
    }
    float* const dst = y + j * h.L;
#if defined(__CUDA_ARCH__)
    if (h.vec != 0) {
      *reinterpret_cast<float4*>(dst) = make_float4(s0, s1, s2, s3);
      continue;
    }
#endif
    dst[0] = s0; dst[1] = s1; dst[2] = s2; dst[3] = s3;
  }
}

/// A (p × q, strides a_rs, a_cs) into shared memory as a[i·q + j], by `nt` threads.
SK_KRON_FN void head_load_a(const HeadArgs& h, float* sa, int tid, int nt) {
  for (int e = tid; e < h.p * h.q; e += nt) {
    const int i = e / h.q, j = e - (e / h.q) * h.q;
    sa[e] = h.a[i * h.a_rs + j * h.a_cs];
  }
}

}  // namespace sparsekern::kron::detail
