#pragma once
// Register-tile fused backward of a two-factor fp32 product (one group, L = 1): the block program
// shared by the CUDA kernel (kron_fast_bwd_f32.cu) and the CPU backend's emulation.
//
// Math. A row of X is (i0, i1) (i0 < p0 outer, i1 < p1 inner), a row of G = ∂ℓ/∂Y is (j0, j1).
//   T0(i0, j1)   = Σ_i1 X(i0, i1) F1(i1, j1)          (the forward's intermediate state)
//   G1(i0, j1)   = Σ_j0 F0(i0, j0) G(j0, j1)          (G pulled back through mode 0)
//   ∂ℓ/∂F0(i0, j0) = Σ_rows Σ_j1 T0(i0, j1) G(j0, j1)
//   ∂ℓ/∂F1(i1, j1) = Σ_rows Σ_i0 X(i0, i1) G1(i0, j1)
//   ∂ℓ/∂X(i0, i1)  = Σ_j1 G1(i0, j1) F1(i1, j1)
// Five GEMMs per tile of rows, each with the FLOPs of one forward step (the forward has two).
//
// Why this kernel. The generic fused backward (kron_tile.h) gives each lane its own rows with 4 × 8
// register tiles (3/4 of the threads idle on 32 × 32 steps), sums ∂ℓ/∂F with 4 × 4 tiles of scalar
// shared-memory loads (8 loads per 16 FMAs), and adds every tile's ∂ℓ/∂F into the block's partial
// sum in global memory (a read-modify-write of p·q values per mode and tile). Here
//   - every GEMM is kron_fast.h's register-tile product Out(j, n) = Σ_k A[k, j] · B(k, n): 16-byte
//     operand vectors, lane pairs reading equal addresses;
//   - the ∂ℓ/∂F sums stay in registers (a 4 × 4 tile per thread and mode) across all of a block's
//     tiles; the block writes its partial sums once, at the end, and the existing reduction kernel
//     adds the blocks' partials (deterministic);
//   - X and G of the next tile load with cp.async while this tile computes (two stages when they
//     fit in shared memory; with one stage, the half of the inputs that the last phase does not
//     read loads during it).
// The ∂ℓ/∂F GEMMs contract over (row, other index), so their operands must be laid out with that
// index major: X and G arrive twice (L2 serves the second read), once natural and once transposed,
// and the steps write their outputs in the layout their consumers read.
//
// Shared-memory buffers of a tile of C rows (floats; "k" is the contraction index of the reader):
//   XT  [i1][c·p0 + i0]       pitch rb   (T0 step: B, k = i1)                      per stage
//   XN  [c·p0 + i0][i1]       pitch p1   (∂ℓ/∂F1: B, k = (c, i0))                  per stage
//   DN  [c][j0·q1 + j1]       chunk Q    (G1 step: B(k = j0, n = (c, j1)), stride q1) per stage
//   DT  [c·q1 + j1][j0]       pitch dtp  (∂ℓ/∂F0: A, k = (c, j1))                  per stage
//   T0T [c·q1 + j1][i0]       pitch ttp  (∂ℓ/∂F0: B)
//   GN  [c·p0 + i0][j1]       pitch gnp  (∂ℓ/∂F1: A)
//   GT  [j1][c·p0 + i0]       pitch rb   (∂X step: B, k = j1)
//   F1 [i1][j1] pitch q1p, F0T [j0][i0] pitch p0p + 4, F1T [j1][i1] pitch p1p + 4 (zero-padded;
//   the 4 floats past a row keep the transposing copies' writes off each other's banks).
// Phases per tile: W (wait for this tile's inputs, start the next tile's), A (T0 and G1 steps),
// B (∂ℓ/∂F0, ∂ℓ/∂F1, ∂X step and its stores). After the last tile: the blocks' partial sums.
//
// Kept T0. A training forward through the register-tile forward keeps T0 (its first step's output,
// kron_fast.h's fast_step_last writes it); then T0T is loaded (a stage buffer, transposed like DT)
// instead of computed: no XT, no F1 copy, four GEMMs. Phase A runs G1 and ∂ℓ/∂F0 (whose inputs are
// all loaded); with `alias`, G1's registers are written after one more barrier over two input
// buffers that nothing reads after phase A, so the block needs about half the shared memory and
// two fit an SM ((64 ⊗ 64): 100 KB instead of 202 KB). With two stages those are DN and DT; with
// one (`late`), T0T and DT, and phase A splits in two: the G1 step reads DN, which landed during
// the previous tile's phase B, while T0T and DT load for ∂ℓ/∂F0 (DN and DT loading at the start
// of the tile, both waited for before any arithmetic, was the order before).
// GN swizzle (q1p ≥ 32): the G1 write-back stores rows 4 apart from neighbouring lanes; at pitch q1p
// those all fall in one bank group, so vector v of GN row r sits at v ^ ((r >> 2) & 7).

#include "kron_fast.h"

namespace sparsekern::kron::detail {

constexpr int kFbUnroll = 8;

/// A thread's registers across barriers: the step tile and the two ∂ℓ/∂F tiles.
template <int TM>
struct FastBwdRegs {
  float acc[TM][TM];
  float df0[4][4];
  float df1[4][4];
};

/// Rows m0 … m0+C−1 of a row-major matrix (rows past M zero) → dst[c·len + e], natural order.
SK_KRON_FN void fb_issue_rows(const float* src, long long ld, int len, bool vec, long long M, long long m0, int C,
                              float* dst, int tid, int nt) {
  for (int c = 0; c < C; ++c) {
    const long long m = m0 + c;
    const bool valid = m < M;
    const float* row = src + (valid ? m : 0) * ld;
    float* d = dst + static_cast<long long>(c) * len;
    if (vec) {
      for (int e = 4 * tid; e < len; e += 4 * nt) copy16_async(d + e, row + e, valid);
    } else {
      for (int e = tid; e < len; e += nt) copy4_async(d + e, row + e, valid);
    }
  }
}

/// Rows m0 … of a matrix whose row is (hi < H, k < K), row-major → dst[c·cstride + k·pitch + hi]
/// (rows past M zero). A warp copies 8 consecutive k of 4 consecutive (c, hi): full 32-byte sectors,
/// and with pitch ≡ 4 (mod 32) its writes hit 32 different banks.
SK_KRON_FN void fb_issue_t(const float* src, long long ld, int H, const FastDiv& div_h, int K, int pitch,
                           int cstride, long long M, long long m0, int C, float* dst, int tid, int nt) {
  const int kk = tid & 7, rstep = nt >> 3;
  int n = tid >> 3;
  int c = div_h.div(n);
  int hi = n - c * H;
  for (; n < C * H; n += rstep) {
    const long long m = m0 + c;
    const bool valid = m < M;
    const float* s = src + (valid ? m : 0) * ld + static_cast<long long>(hi) * K;
    float* d = dst + c * cstride + hi;
    for (int k = kk; k < K; k += 8) copy4_async(d + k * pitch, s + k, valid);
    hi += rstep;
    while (hi >= H) {
      hi -= H;
      ++c;
    }
  }
}

/// dst[j·(w + 4) + i] ← F[i, j] for j < q, i < w (zeros for p ≤ i), asynchronously. A warp copies
/// 8 consecutive j of 4 consecutive i: 32-byte runs of a row-major F, and at the pitch w + 4 its
/// writes land in 32 different banks. (Walking i fastest, the layout's order, made every lane of a
/// copy read its own row of F: 32 sectors per warp copy, and ~10% of the stall samples of the
/// (64 ⊗ 64) backward at 1024 rows waited on these copies at the blocks' start; ncu, H100, s18.)
///
/// Where F's rows are contiguous and 16-byte aligned (and q a multiple of 4) each thread instead
/// reads 16-byte vectors F[i, j … j+3] with plain loads and stores their four values: ~4x fewer
/// instructions than the 4-byte copies, which were ~5% of the kept backward's at 1024 × (64 ⊗ 64)
/// (ncu, s36_run6.sh), all before a block's first tile. The loads all issue before the first
/// store, and the block waits at its first barrier for the copies either way.
SK_KRON_FN void fb_copy_transposed(const float* f, long long rs, long long cs, int p, int q, int w,
                                   float* dst, int tid, int nt) {
  const int s = ilog2c(w);  // w: a power of two ≥ 8
  if (rows_vec16(f, rs, cs, q)) {
    // Lane order: i fastest (the stores of a warp, rows i of one dst line, hit 32 banks).
    const int total = (q >> 2) << s;
    constexpr int kBatch = 4;  // loads in flight per thread before their stores
    for (int e0 = tid; e0 < total; e0 += kBatch * nt) {
      float v[kBatch][4];
      SK_KRON_UNROLL
      for (int b = 0; b < kBatch; ++b) {
        const int e = e0 + b * nt;
        const int i = e & (w - 1), j = (e >> s) << 2;
        if (e < total && i < p) {
          ldg4(f + i * rs + j, v[b]);
        } else {
          v[b][0] = v[b][1] = v[b][2] = v[b][3] = 0.0f;
        }
      }
      SK_KRON_UNROLL
      for (int b = 0; b < kBatch; ++b) {
        const int e = e0 + b * nt;
        if (e >= total) break;
        const int i = e & (w - 1), j = (e >> s) << 2;
        SK_KRON_UNROLL
        for (int u = 0; u < 4; ++u) dst[(j + u) * (w + 4) + i] = v[b][u];
      }
    }
    return;
  }
  const int total = ((q + 7) >> 3) * w * 8;
  for (int e = tid; e < total; e += nt) {
    const int t = e >> 3;
    const int i = t & (w - 1), j = ((t >> s) << 3) | (e & 7);
    if (j >= q) continue;
    const bool valid = i < p;
    copy4_async(dst + j * (w + 4) + i, valid ? f + i * rs + j * cs : f, valid);
  }
}

/// Starts the factor copies (cp.async, as kron_fast.h's fast_load_factors, for the same reason):
/// F1 [i1][j1] (pitch q1p; not when T0 is kept), F0ᵀ [j0][i0] (pitch p0p + 4), F1ᵀ [j1][i1] (pitch
/// p1p + 4), padding zero-filled. The widths are powers of two.
SK_KRON_FN void fb_load_factors(const FastBwdArgs& a, float* sm, int tid, int nt) {
  const float* f0 = static_cast<const float*>(a.f0);
  const float* f1 = static_cast<const float*>(a.f1);
  if (a.t0 == nullptr) {
    const int s = ilog2c(a.q1p);
    for (int e = tid; e < a.p1 * a.q1p; e += nt) {
      const int i = e >> s, j = e & (a.q1p - 1);
      const bool valid = j < a.q1;
      copy4_async(sm + a.off_f1 + e, valid ? f1 + i * a.f1_rs + j * a.f1_cs : f1, valid);
    }
  }
  fb_copy_transposed(f1, a.f1_rs, a.f1_cs, a.p1, a.q1, a.p1p, sm + a.off_f1t, tid, nt);
  fb_copy_transposed(f0, a.f0_rs, a.f0_cs, a.p0, a.q0, a.p0p, sm + a.off_f0t, tid, nt);
}

/// Starts the copies of tile `tile`'s inputs into stage buffer `in`: part 1 = XT (or, T0 kept, T0T)
/// and DN, part 2 = XN and DT (phase B reads part 2 and T0T).
/// (fb_issue_sel: any subset of the four buffers.)
SK_KRON_FN void fb_issue_sel(const FastBwdArgs& a, float* in, long long tile, bool first, bool dn, bool xn, bool dt,
                             int tid, int nt) {
  const long long m0 = tile * a.chunks;
  const int C = a.chunks;
  if (first) {
    if (a.t0 != nullptr)  // T0T[(c·q1 + j1)·ttp + i0] from T0's rows (i0, j1)
      fb_issue_t(a.t0, a.ldt0, a.p0, a.div_p0, a.q1, a.ttp, a.q1 * a.ttp, a.M, m0, C, in + a.in_t0t, tid, nt);
    else
      fb_issue_t(a.x, a.ldx, a.p0, a.div_p0, a.p1, a.rb, a.p0, a.M, m0, C, in, tid, nt);
  }
  if (dn) fb_issue_rows(a.g, a.ldg, a.q0 * a.q1, a.vec_g != 0, a.M, m0, C, in + a.in_dn, tid, nt);
  if (xn) fb_issue_rows(a.x, a.ldx, a.p0 * a.p1, a.vec_x != 0, a.M, m0, C, in + a.in_xn, tid, nt);
  if (dt) fb_issue_t(a.g, a.ldg, a.q0, a.div_q0, a.q1, a.dtp, a.q1 * a.dtp, a.M, m0, C, in + a.in_dt, tid, nt);
}

SK_KRON_FN void fb_issue(const FastBwdArgs& a, float* in, long long tile, int part, int tid, int nt) {
  fb_issue_sel(a, in, tile, (part & 1) != 0, (part & 1) != 0, (part & 2) != 0, (part & 2) != 0, tid, nt);
}

/// T0 step: Out(j1, n = (c, i0)) = Σ_i1 F1[i1, j1] XT[i1, n] → T0T[(c·q1 + j1)·ttp + i0].
template <int TM, int QP>
SK_KRON_FN void fb_step_t0(const FastBwdArgs& a, const float* xt, float* sm, int tid, float (&acc)[TM][TM]) {
  using Geo = FastGeo<TM, TM, QP>;
  const Geo g(tid);
  const int n_cols = a.chunks * a.p0;
  const float* b[TM / 4];
  SK_KRON_UNROLL
  for (int v = 0; v < TM / 4; ++v) b[v] = xt + (g.nv[v] < n_cols ? g.nv[v] : 0);
  fast_mma<TM, TM, QP>(sm + a.off_f1 + g.j0, b, a.rb, a.p1, acc);
  float* t0t = sm + a.off_t0t;
  // The fields in locals: the stores' "memory" clobbers would reload each one per store.
  const int p0 = a.p0, q1 = a.q1, ttp = a.ttp;
  const FastDiv div_p0 = a.div_p0;
  SK_KRON_UNROLL
  for (int v = 0; v < TM / 4; ++v) {
    const int n = g.nv[v];
    if (n >= n_cols) continue;
    const int c = div_p0.div(n);
    const int i0 = n - c * p0;  // n … n+3 lie in one chunk (p0 is a multiple of 4)
    SK_KRON_UNROLL
    for (int jj = 0; jj < TM; ++jj) {
      const int j = Geo::jof(g.j0, jj);
      if (j < q1)
        sts4(t0t + (c * q1 + j) * ttp + i0, acc[jj][4 * v], acc[jj][4 * v + 1], acc[jj][4 * v + 2],
             acc[jj][4 * v + 3]);
    }
  }
}

/// The column vector v of a G1 step: its chunk c and first j1 (lo).
template <int TM, int QP>
SK_KRON_FN void fb_g1_cols(const FastBwdArgs& a, const FastGeo<TM, TM, QP>& g, int v, int& c, int& lo) {
  const int n = g.nv[v] < a.chunks * a.q1 ? g.nv[v] : 0;
  c = a.div_q1.div(n);
  lo = n - c * a.q1;
}

/// G1 step: Out(i0, n = (c, j1)) = Σ_j0 F0ᵀ[j0, i0] DN(c, j0, j1) into the registers (BS: q1 when
/// known at compile time, else 0).
template <int TM, int QP, int BS = 0>
SK_KRON_FN void fb_step_g1(const FastBwdArgs& a, const float* dn, const float* sm, int tid, float (&acc)[TM][TM]) {
  using Geo = FastGeo<TM, TM, QP>;
  const Geo g(tid);
  const int Q = a.q0 * a.q1;
  const float* b[TM / 4];
  SK_KRON_UNROLL
  for (int v = 0; v < TM / 4; ++v) {
    int c, lo;
    fb_g1_cols<TM, QP>(a, g, v, c, lo);
    b[v] = dn + c * Q + lo;
  }
  fast_mma<TM, TM, QP, kFbUnroll, BS>(sm + a.off_f0t + g.j0, b, a.q1, a.q0, acc, QP + 4);  // F0ᵀ: pitch p0p + 4
}

/// Writes the G1 step's registers to GN[(c·p0 + i0)·gnp + j1] and GT[j1·rb + c·p0 + i0].
template <int TM, int QP>
SK_KRON_FN void fb_write_g1(const FastBwdArgs& a, float* gn, float* gt, int tid, const float (&acc)[TM][TM]) {
  using Geo = FastGeo<TM, TM, QP>;
  const Geo g(tid);
  const int n_cols = a.chunks * a.q1;
  // The fields in locals (the stores' "memory" clobbers would reload them per store).
  const int p0 = a.p0, gnp = a.gnp, rb = a.rb;
  const bool swz = a.gn_swz != 0;
  SK_KRON_UNROLL
  for (int v = 0; v < TM / 4; ++v) {
    if (g.nv[v] >= n_cols) continue;
    int c, lo;  // j1 = lo … lo+3 (q1 is a multiple of 4)
    fb_g1_cols<TM, QP>(a, g, v, c, lo);
    SK_KRON_UNROLL
    for (int jj = 0; jj < TM; ++jj) {
      const int i = Geo::jof(g.j0, jj);
      const int r = c * p0 + i;
      const int col = swz ? 4 * ((lo >> 2) ^ ((r >> 2) & 7)) : lo;
      if (i < p0)
        sts4(gn + r * gnp + col, acc[jj][4 * v], acc[jj][4 * v + 1], acc[jj][4 * v + 2], acc[jj][4 * v + 3]);
    }
    SK_KRON_UNROLL
    for (int u = 0; u < 4; ++u) {
      float* row = gt + (lo + u) * rb + c * p0;
      SK_KRON_UNROLL
      for (int w = 0; w < TM / 4; ++w) {
        const int i = g.j0 + w * 4 * Geo::LJ;
        if (i < p0)
          sts4(row + i, acc[4 * w][4 * v + u], acc[4 * w + 1][4 * v + u], acc[4 * w + 2][4 * v + u],
               acc[4 * w + 3][4 * v + u]);
      }
    }
  }
}

/// ∂X step: Out(i1, n = (c, i0)) = Σ_j1 F1ᵀ[j1, i1] GT[j1, n] → ∂ℓ/∂X[m0 + c, i0·p1 + i1] (BS: rb
/// when known at compile time, else 0).
template <int TM, int QP, int BS = 0>
SK_KRON_FN void fb_step_dx(const FastBwdArgs& a, long long tile, const float* gt, const float* sm, int tid,
                           float (&acc)[TM][TM]) {
  using Geo = FastGeo<TM, TM, QP>;
  const Geo g(tid);
  const int n_cols = a.chunks * a.p0;
  const float* b[TM / 4];
  SK_KRON_UNROLL
  for (int v = 0; v < TM / 4; ++v) b[v] = gt + (g.nv[v] < n_cols ? g.nv[v] : 0);
  fast_mma<TM, TM, QP, kFbUnroll, BS>(sm + a.off_f1t + g.j0, b, a.rb, a.q1, acc, QP + 4);  // F1ᵀ: pitch p1p + 4
  // The fields in locals (the stores' "memory" clobbers would reload them per store); n … n+3 lie
  // in one chunk (p0 is a multiple of 4), so one division per vector.
  const int p0 = a.p0, p1 = a.p1;
  const FastDiv div_p0 = a.div_p0;
  const long long ldgx = a.ldgx, mrem = a.M - tile * a.chunks;
  float* const gx_tile = a.gx + tile * a.chunks * ldgx;
  const bool vec = a.vec_gx != 0;
  SK_KRON_UNROLL
  for (int v = 0; v < TM / 4; ++v) {
    const int c = div_p0.div(g.nv[v]);
    float* const rows = gx_tile + c * ldgx + static_cast<long long>(g.nv[v] - c * p0) * p1;
    SK_KRON_UNROLL
    for (int u = 0; u < 4; ++u) {
      const int n = g.nv[v] + u;
      if (n >= n_cols || c >= mrem) continue;
      float* row = rows + u * p1;
      SK_KRON_UNROLL
      for (int w = 0; w < TM / 4; ++w) {
        const int i = g.j0 + w * 4 * Geo::LJ;
        if (i >= p1) continue;
        if (vec) {
          stg4(row + i, acc[4 * w][4 * v + u], acc[4 * w + 1][4 * v + u], acc[4 * w + 2][4 * v + u],
               acc[4 * w + 3][4 * v + u]);
        } else {
          SK_KRON_UNROLL
          for (int r = 0; r < 4; ++r) row[i + r] = acc[4 * w + r][4 * v + u];
        }
      }
    }
  }
}

/// The warp's share of a ∂ℓ/∂F product: df(j, n) += Σ_k A[k, j] B[k, n] over its range of k, with
/// A rows `astride` apart, B rows `bstride` apart (n < np valid); gp = fb_grad_plan(QP, np, K, …).
/// AS, BS: the strides where the caller knows them at compile time, else 0.
template <int QP, int AS = 0, int BS = 0>
SK_KRON_FN void fb_grad(const float* A, int astride_rt, const float* B, int bstride, int np, int K,
                        const FbGradPlan& gp, int tid, float (&df)[4][4]) {
  const int astride = AS != 0 ? AS : astride_rt;
  const int warp = tid >> 5;
  const int split = gp.div_nwn.div(warp);
  if (split >= gp.sp.splits) return;
  const FastGeo<4, 4, QP> g((warp - split * gp.sp.nwn) * 32 + (tid & 31));
  const int kc = gp.kc;
  const int k0 = split * kc;
  const int kn = K - k0 < kc ? K - k0 : kc;
  if (kn <= 0) return;
  const float* b[1] = {B + static_cast<long long>(k0) * bstride + (g.nv[0] < np ? g.nv[0] : 0)};
  fast_mma_acc<4, 4, QP, kFbUnroll, BS>(A + static_cast<long long>(k0) * astride + g.j0, astride, b, bstride, kn, df);
}

/// fb_grad for an A stored with swizzled 16-byte vectors (FastBwdArgs::gn_swz: vector v of row k at
/// v ^ ((k >> 2) & 7); QP ≥ 32, K a multiple of 4). The splits start at multiples of 4 rows, so one
/// swizzle serves four consecutive k. A's stride is QP (FastBwdArgs::gnp with the swizzle); BS: B's
/// when known at compile time, else 0.
template <int QP, int BS = 0>
SK_KRON_FN void fb_grad_swz(const float* A, const float* B, int bstride_rt, int np, int K, const FbGradPlan& gp,
                            int tid, float (&df)[4][4]) {
  constexpr int astride = QP;
  const int bstride = BS != 0 ? BS : bstride_rt;
  static_assert(QP >= 32, "the swizzle permutes 8 vectors of a row");
  const int warp = tid >> 5;
  const int split = gp.div_nwn.div(warp);
  if (split >= gp.sp.splits) return;
  const FastGeo<4, 4, QP> g((warp - split * gp.sp.nwn) * 32 + (tid & 31));
  const int kc = gp.kc;
  const int k0 = split * kc;
  const int kn = K - k0 < kc ? K - k0 : kc;
  const int vj = g.j0 >> 2;
  const float* b = B + static_cast<long long>(k0) * bstride + (g.nv[0] < np ? g.nv[0] : 0);
#if defined(__CUDACC__)
#pragma unroll 2
#endif
  for (int kk = 0; kk < kn; kk += 4) {
    const int k = k0 + kk;
    const float* arow = A + static_cast<long long>(k) * astride + 4 * (vj ^ ((k >> 2) & 7));
    SK_KRON_UNROLL
    for (int u = 0; u < 4; ++u) {
      float av[4], bv[4];
      lds4(arow + u * astride, av);
      lds4(b + (kk + u) * bstride, bv);
      SK_KRON_UNROLL
      for (int i = 0; i < 4; ++i) {
        SK_KRON_UNROLL
        for (int j = 0; j < 4; ++j) df[i][j] += av[i] * bv[j];
      }
    }
  }
}

/// Writes the warp's ∂ℓ/∂F tile (df(j, n) = ∂ℓ/∂F[n, j]) to scratch[split][n·q + j].
template <int QP>
SK_KRON_FN void fb_grad_store(const float (&df)[4][4], int np, int q, const FbGradPlan& gp, float* scratch,
                               int tid) {
  const int warp = tid >> 5;
  const int split = gp.div_nwn.div(warp);
  if (split >= gp.sp.splits) return;
  using Geo = FastGeo<4, 4, QP>;
  const Geo g((warp - split * gp.sp.nwn) * 32 + (tid & 31));
  float* out = scratch + static_cast<long long>(split) * np * q;
  SK_KRON_UNROLL
  for (int u = 0; u < 4; ++u) {
    const int n = g.nv[0] + u;
    if (n >= np) continue;
    SK_KRON_UNROLL
    for (int jj = 0; jj < 4; ++jj) {
      const int j = Geo::jof(g.j0, jj);
      if (j < q) out[n * q + j] = df[jj][u];
    }
  }
}

/// Sums the splits of scratch (in split order) into the block's partial sum.
SK_KRON_FN void fb_grad_reduce(const float* scratch, int splits, int pq, float* part, int tid, int nt) {
  for (int e = tid; e < pq; e += nt) {
    float s = 0.0f;
    for (int k = 0; k < splits; ++k) s += scratch[k * pq + e];
    part[e] = s;
  }
}

/// The padded width every step of the backward dispatches on (q0p, q1p, p0p, p1p) when they are all
/// 32 or all 64 (the kernels specialised to it), else 0.
inline int fb_uniform_qpad(const FastBwdArgs& a) {
  const int u = a.q0p;
  return a.q1p == u && a.p0p == u && a.p1p == u && (u == 32 || u == 64) ? u : 0;
}

/// Calls f(IntC<U>) with U = fb_uniform_qpad(a) for 4 × 4 step tiles (TM = 4), else U = 0: the
/// specialisations the CUDA launcher and the CPU emulation both run.
template <int TM, class F>
inline void with_fb_width(const FastBwdArgs& a, F&& f) {
  switch (TM == 4 ? fb_uniform_qpad(a) : 0) {
    case 32: f(IntC<32>{}); break;
    case 64: f(IntC<64>{}); break;
    default: f(IntC<0>{}); break;
  }
}

/// The block program (`Exec` as in kron_fast.h; regs is the thread's FastBwdRegs<TM>). U: the width
/// every step has (fb_uniform_qpad), or 0 for any.
template <int TM, int U, class Exec>
SK_KRON_PROGRAM void fast_backward2_program(const FastBwdArgs& a, Exec& ex, float* sm, long long block,
                                            long long grid) {
  using Regs = FastBwdRegs<TM>;
  const int nt = ex.nthreads();
  const bool two = a.nstage == 2;
  const bool late = a.alias && !two;
  const bool kept = a.t0 != nullptr;
  ex.phase([&](int tid, Regs& r) {
    SK_KRON_UNROLL
    for (int i = 0; i < 4; ++i) {
      SK_KRON_UNROLL
      for (int j = 0; j < 4; ++j) r.df0[i][j] = r.df1[i][j] = 0.0f;
    }
    const bool has = block < a.ntiles;
    if (late) {
      // `late` (T0 kept, one stage, G1 over T0T and DT): three copy groups, in the order the
      // first tile reads them: DN with the factors (the G1 step), T0T and DT (∂ℓ/∂F0), XN (phase B).
      // The block waits here for the first group only; the G1 step covers the other two.
      if (has) fb_issue_sel(a, sm + a.off_in[0], block, false, true, false, false, tid, nt);
      fb_load_factors(a, sm, tid, nt);
      async_commit();
      if (has) fb_issue_sel(a, sm + a.off_in[0], block, true, false, false, true, tid, nt);
      async_commit();
      if (has) fb_issue_sel(a, sm + a.off_in[0], block, false, false, true, false, tid, nt);
      async_commit();
      async_wait<2>();
      return;
    }
    if (has) fb_issue_sel(a, sm + a.off_in[0], block, true, true, true, true, tid, nt);
    fb_load_factors(a, sm, tid, nt);
    async_commit();
  });
  // The ∂ℓ/∂F products' splits, planned on the host for kThreads (fast_bwd_layout): the products,
  // the stores of their partial sums and the block's reduction all read these.
  const FbGradPlan& gp0 = a.grad[0];
  const FbGradPlan& gp1 = a.grad[1];
  // The products' row strides, as compile-time constants where the kernel's widths fix them (the
  // loads of an unrolled k loop then address off one register each; a stride known only at run
  // time costs an address computation per k and operand): DT's is q0p + 4 and, in the uniform
  // kernels (U), T0T's p0p + 4 = U + 4, GN's (swizzled) q1p; DN's q1, XN's p1 and GT's rb only
  // where they equal U (square factors of width U) or U + 4 (one row per tile).
  auto grad0 = [&](const float* in, int tid, Regs& r) {
    with_qpad_u<U>(a.q0p, [&](auto qp) {
      constexpr int QP = decltype(qp)::value;
      fb_grad<QP, QP + 4, U != 0 ? U + 4 : 0>(in + a.in_dt, a.dtp, kept ? in + a.in_t0t : sm + a.off_t0t, a.ttp,
                                              a.p0, a.chunks * a.q1, gp0, tid, r.df0);
    });
  };
  auto step_g1 = [&](const float* in, int tid, Regs& r) {
    with_qpad_u<U>(a.p0p, [&](auto qp) {
      constexpr int QP = decltype(qp)::value;
      if constexpr (U != 0) {
        if (a.q1 == U) {
          fb_step_g1<TM, QP, U>(a, in + a.in_dn, sm, tid, r.acc);
          return;
        }
      }
      fb_step_g1<TM, QP>(a, in + a.in_dn, sm, tid, r.acc);
    });
  };
  auto grad1_dx = [&](const float* gn, const float* gt, const float* in, long long tile, int tid, Regs& r) {
    with_qpad_u<U>(a.q1p, [&](auto qp) {
      constexpr int QP = decltype(qp)::value;
      if constexpr (QP >= 32) {
        if (a.gn_swz) {
          if constexpr (U != 0) {
            if (a.p1 == U) {
              fb_grad_swz<QP, U>(gn, in + a.in_xn, a.p1, a.p1, a.chunks * a.p0, gp1, tid, r.df1);
              return;
            }
          }
          fb_grad_swz<QP>(gn, in + a.in_xn, a.p1, a.p1, a.chunks * a.p0, gp1, tid, r.df1);
          return;
        }
      }
      fb_grad<QP>(gn, a.gnp, in + a.in_xn, a.p1, a.p1, a.chunks * a.p0, gp1, tid, r.df1);
    });
    if (a.gx == nullptr) return;
    with_qpad_u<U>(a.p1p, [&](auto qp) {
      constexpr int QP = decltype(qp)::value;
      if constexpr (U != 0) {
        if (a.rb == U + 4) {
          fb_step_dx<TM, QP, U + 4>(a, tile, gt, sm, tid, r.acc);
          return;
        }
      }
      fb_step_dx<TM, QP>(a, tile, gt, sm, tid, r.acc);
    });
  };
  long long i = 0;
  if (late) {
    // One stage, T0 kept, G1 written over T0T (as GN) and DT (as GT) once ∂ℓ/∂F0 has read them, so
    // that DN is free during phase B and takes the next tile's copy there. Per tile:
    //   A1: T0T, DT and XN copies start (from the second tile on); G1 step from DN (landed);
    //   A2: ∂ℓ/∂F0 from T0T and DT (landed at the end of A1);
    //   A3: G1's registers to GN and GT (XN landed at its end);
    //   B:  the next tile's DN copy starts; ∂ℓ/∂F1 and ∂X (DN landed at its end).
    float* const in = sm + a.off_in[0];
    float* const gn = in + a.in_t0t;
    float* const gt = in + a.in_dt;
    for (long long tile = block; tile < a.ntiles; tile += grid, ++i) {
      const long long next = tile + grid;
      const bool first = i == 0;
      ex.phase([&](int tid, Regs& r) {
        if (!first) {
          fb_issue_sel(a, in, tile, true, false, false, true, tid, nt);
          async_commit();
          fb_issue_sel(a, in, tile, false, false, true, false, tid, nt);
          async_commit();
        }
        step_g1(in, tid, r);
        async_wait<1>();  // T0T and DT
      });
      ex.phase([&](int tid, Regs& r) { grad0(in, tid, r); });
      ex.phase([&](int tid, Regs& r) {
        with_qpad_u<U>(a.p0p, [&](auto qp) { fb_write_g1<TM, decltype(qp)::value>(a, gn, gt, tid, r.acc); });
        async_wait<0>();  // XN
      });
      ex.phase([&](int tid, Regs& r) {
        if (next < a.ntiles) {
          fb_issue_sel(a, in, next, false, true, false, false, tid, nt);
          async_commit();
        }
        grad1_dx(gn, gt, in, tile, tid, r);
        async_wait<0>();  // the next tile's DN
      });
    }
  }
  for (long long tile = block; !late && tile < a.ntiles; tile += grid, ++i) {
    const long long next = tile + grid;
    const int cur = two ? static_cast<int>(i & 1) : 0;
    float* const in = sm + a.off_in[cur];
    // W: this tile's inputs in shared memory; the next tile's (two stages) or this tile's second
    // half (one stage: its first half was started during the previous tile's phase B) in flight.
    ex.phase([&](int tid, Regs&) {
      if (two) {
        if (next < a.ntiles) fb_issue(a, sm + a.off_in[cur ^ 1], next, 3, tid, nt);
        async_commit();
        async_wait<1>();
      } else {
        if (i > 0) fb_issue(a, in, tile, 2, tid, nt);
        async_commit();
        async_wait<0>();
      }
    });
    // A: T0 = X·F1 and G1 = F0·G, written where phase B reads them; with T0 kept, G1 and ∂ℓ/∂F0
    // (which reads only this tile's inputs, T0T and DT). With `alias` (T0 kept, two stages), G1 is
    // written after a barrier over DN and DT, which nothing reads after phase A.
    float* const gn = a.alias ? in + a.in_dn : sm + a.off_gn;
    float* const gt = a.alias ? in + a.in_dt : sm + a.off_gt;
    ex.phase([&](int tid, Regs& r) {
      if (!kept)
        with_qpad_u<U>(a.q1p, [&](auto qp) { fb_step_t0<TM, decltype(qp)::value>(a, in, sm, tid, r.acc); });
      step_g1(in, tid, r);
      if (!a.alias)
        with_qpad_u<U>(a.p0p, [&](auto qp) { fb_write_g1<TM, decltype(qp)::value>(a, gn, gt, tid, r.acc); });
      if (kept) grad0(in, tid, r);
    });
    if (a.alias) {
      ex.phase([&](int tid, Regs& r) {
        with_qpad_u<U>(a.p0p, [&](auto qp) { fb_write_g1<TM, decltype(qp)::value>(a, gn, gt, tid, r.acc); });
      });
    }
    // B: ∂ℓ/∂F1, ∂X and (T0 recomputed) ∂ℓ/∂F0. With one stage (and no alias), part 1 of the
    // inputs (XT or T0T, and DN) is free now: the next tile's copies into it start first.
    const bool issue = !two && !a.alias && next < a.ntiles;
    ex.phase([&](int tid, Regs& r) {
      if (issue) {
        fb_issue(a, in, next, 1, tid, nt);
        async_commit();
      }
      if (!kept) grad0(in, tid, r);
      grad1_dx(gn, gt, in, tile, tid, r);
    });
  }
  // The block's partial sums: every copy has landed (the last W waited for all of them) and every
  // thread is past the last phase B, so the scratch may reuse the stage buffers.
  float* const scratch0 = sm + a.off_scratch;
  float* const scratch1 = scratch0 + gp0.sp.splits * a.p0 * a.q0;
  ex.phase([&](int tid, Regs& r) {
    pdl_launch_dependents();  // the reduction of the partials may start launching
    async_wait<0>();
    with_qpad_u<U>(a.q0p, [&](auto qp) { fb_grad_store<decltype(qp)::value>(r.df0, a.p0, a.q0, gp0, scratch0, tid); });
    with_qpad_u<U>(a.q1p, [&](auto qp) { fb_grad_store<decltype(qp)::value>(r.df1, a.p1, a.q1, gp1, scratch1, tid); });
  });
  ex.phase_nosync([&](int tid, Regs&) {
    float* part = a.partial + block * a.part_stride;
    fb_grad_reduce(scratch0, gp0.sp.splits, a.p0 * a.q0, part, tid, nt);
    fb_grad_reduce(scratch1, gp1.sp.splits, a.p1 * a.q1, part + a.p0 * a.q0, tid, nt);
  });
}

}  // namespace sparsekern::kron::detail
