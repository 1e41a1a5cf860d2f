#pragma once
// Fiber-per-thread fused backward for small square factors (fp32, one group over every mode, the
// forward's scope: small_eligible): the block program shared by the CUDA kernel
// (kron_small_bwd_f32.cu) and the CPU backend's emulation (kron_matmul_cpu.cpp). It reuses the
// forward's passes (kron_small.h); the default for three or more factors (kron_plan.cpp says why),
// SPARSEKERN_KRON_BWD_KERNEL=small for two as well.
//
// What a tile of R rows computes. With S⁽ᵗ⁾ = X ×₀ F₀ … ×ₜ₋₁ Fₜ₋₁ (the modes before t applied;
// S⁽⁰⁾ = X) and H⁽ᵗ⁾ = ∂ℓ/∂Y ×ₙ₋₁ Fₙ₋₁ᵀ … ×ₜ₊₁ Fₜ₊₁ᵀ (the modes after t pulled back; H⁽ⁿ⁻¹⁾ = ∂ℓ/∂Y),
// mode products on different modes commute, so
//   ∂ℓ/∂Fₜ[a, j] = Σ over the rows and the fibers of mode t of S⁽ᵗ⁾[…, a, …] · H⁽ᵗ⁾[…, j, …],
//   ∂ℓ/∂X = H⁽⁰⁾ ×₀ F₀ᵀ.
// The program: load the tile's X and ∂ℓ/∂Y; n−1 forward passes S⁽¹⁾ … S⁽ⁿ⁻¹⁾, each into its own
// buffer (they are consumed in the opposite order); then for t = n−1 … 0 a contraction pass (∂ℓ/∂Fₜ
// += the tile's sum, in registers) and a pull-back pass H⁽ᵗ⁻¹⁾ = H⁽ᵗ⁾ ×ₜ Fₜᵀ in place in the ∂ℓ/∂Y
// buffer; the last one (t = 0) stores ∂ℓ/∂X straight from registers, like the forward's final pass
// stores Y. 3n − 1 passes per tile against the forward's n, all on shared memory.
// Pull-back passes are the forward's pass with the untransposed factor copy: y[a] = Σ_j F[a, j]·h[j].
// Contraction passes: a thread owns a 4 × 4 block of ∂ℓ/∂Fₜ (B = (p/4)² blocks) and every
// (nt/B)-th fiber of the tile (consecutive lanes, consecutive fibers; for s > 1 groups of four
// fibers, read as 16-byte vectors), with 16 FFMAs per fiber; its 16 sums live in the thread's registers (a local array per mode) across the
// block's tiles. After the last tile the block adds its threads' sums (fixed order: deterministic)
// into its partial ∂ℓ/∂Fₜ, and one reduction launch sums the blocks' partials (as the other fused
// backwards do).
// Shared memory: both factor copies and a pool of n + 1 tiles of 32·threads floats (n + 2 for two
// modes): X, ∂ℓ/∂Y and the states S⁽¹⁾ … S⁽ⁿ⁻¹⁾; the next tile's X and ∂ℓ/∂Y load into the first
// states that die, during this tile's later passes (small_backward_program).
// Lean pool (SmallBwdArgs::lean, n ≥ 3, opt-in; measured slower at every shape tried, see below): n tiles. X arrives in S⁽¹⁾'s
// buffer and the first recompute pass runs on it in place; mode 0's contraction, the only other
// reader of X, reads it again from global memory (small_dF_pass_x; L2 holds the block's recent
// tiles). One tile less per block: three blocks per SM instead of two at 8⊗8⊗8⊗8. Session 13 (H100,
// µs, default vs lean): 1024 × [8^4] 67.0 vs 80.1, [16^3] 76.3 vs 83.6, 4096 × [8^4] 205 vs 226,
// 256 × [16^4] 473 vs 518: the re-read of X costs more than the extra block per SM gains.

#include "kron_small.h"

namespace sparsekern::kron::detail {

/// Most modes of a small-factor product: p ≥ 4 and Π p ≤ 8192.
constexpr int kSmallMaxModes = 6;

/// The ∂ℓ/∂Fₜ sums of a thread, per mode, kept across the block's tiles.
struct SmallBwdRegs {
  float acc[kSmallMaxModes][16];
};

/// Copies factor t untransposed into shared memory (F2[a·p + j] = F[a, j]), asynchronously.
SK_KRON_FN void small_load_factors_plain(const SmallBwdArgs& b, float* sm, int tid, int nt) {
  const SmallArgs& a = b.a;
  for (int t = 0; t < a.nf; ++t) {
    const SmallMode& md = a.md[t];
    const int p = md.p, lp = ilog2_rt(p);
    for (int e = tid; e < p * p; e += nt) {
      const int i = e >> lp, j = e & (p - 1);
      copy4_async(sm + b.f2_off[t] + e, md.f + i * md.f_rs + j * md.f_cs, true);
    }
  }
}

/// c[u·4 + v] += Σ_w s[u][w]·h[v][w]: four fibers' (w) contributions to a 4 × 4 block of ∂ℓ/∂Fₜ.
SK_KRON_FN void small_dF_group(const float (&sv)[4][4], const float (&hv)[4][4], float* c) {
  SK_KRON_UNROLL
  for (int w = 0; w < 4; ++w) {
    SK_KRON_UNROLL
    for (int u = 0; u < 4; ++u) {
      SK_KRON_UNROLL
      for (int v = 0; v < 4; ++v) c[u * 4 + v] += sv[u][w] * hv[v][w];
    }
  }
}

/// The contraction pass of mode t: acc[u·4 + v] += Σ over the thread's fibers of s[a0 + u]·h[j0 + v]
/// (s from the state buffer `sb`, h from the gradient buffer `hb`, both in the tile layout).
/// Addressing as in small_pass_io: a fiber's element a sits at swz(base) ^ swz(a·s) (disjoint bits),
/// so the eight element offsets of the thread's 4 × 4 block are computed once per pass. s = 1 (the
/// last mode): whole fibers, one 16-byte vector of s and one of h each. s > 1 (s ≥ 4): groups of
/// four fibers with consecutive lo, whose element a is one 16-byte vector, so a group is eight
/// vector loads for 64 FFMAs (session 11's pass loaded the same elements one float at a time, each
/// address a full swizzle: ~4 instructions per FFMA).
/// Which fibers. Thread (blk, sl) takes fibers (s = 1) or groups (s > 1) q = sl + i·slices. A tile
/// is 32·nt elements, so that is i < 2P fibers or i < P/2 groups, known at compile time: the groups
/// unroll, the fibers go four at a time. q ↦ its first element is a relocation of q's bits (a shift
/// for s = 1; for s > 1 the bits of the group index within a row, shifted by 2 with P's bits
/// inserted at log2 s, and the row above), and the swizzle is linear over GF(2), so the offset of
/// q = sl + i·slices is b(sl) XOR the B[k] = b(slices·2^k) of i's bits: walking i in Gray-code
/// order, each step XORs one B[k] into the running offsets (one swizzle per pass for the groups,
/// one per four fibers). Session 33 (ncu, 1024 × (8⊗8⊗8⊗8)): a swizzle per fiber, the loops and a
/// runtime division for the slices had made these passes execute more integer instructions than
/// FFMAs. With the 2P fibers unrolled too, 4096 × (16⊗16⊗16) ran 2% slower than before; with
/// both walks four at a time ptxas spilled 36 bytes at p = 16 (this form: none at p ≤ 16).
/// LS, LN ≥ 0: log2 s and log2 N at compile time (the uniform-shape kernels), as in small_pass_io.
template <int P, int LS = -1, int LN = -1>
SK_KRON_FN void small_dF_pass(const SmallArgs& a, int t, const float* sb, const float* hb, int tid, int nt,
                              float* acc) {
  constexpr int LP = ilog2c(P), LPB = ilog2c(P / 4);
  const int lsl = ctz_rt(nt) - 2 * LPB;  // log2 slices: nt / NB, NB = (P/4)² blocks (nt ≥ 128 ≥ NB)
  const int sl = tid & ((1 << lsl) - 1), blk = tid >> lsl;
  const int a0 = (blk >> LPB) * 4, j0 = (blk & ((1 << LPB) - 1)) * 4;
  const int ls = LS >= 0 ? LS : a.md[t].ls;
  const int ln = LN >= 0 ? LN : a.ln;
  const char* const sbb = reinterpret_cast<const char*>(sb);
  const char* const hbb = reinterpret_cast<const char*>(hb);
  float c[16];
  SK_KRON_UNROLL
  for (int k = 0; k < 16; ++k) c[k] = acc[k];
  if (ls == 0) {
    // Fiber q of the tile starts at element q·P (rows are whole fibers); a0 and j0 are multiples
    // of 4, so each operand is one 16-byte vector.
    constexpr int I = 2 * P, U = 4, LU = 2;  // fibers per thread (≥ 8), visited four at a time
    int bk[LU];
    SK_KRON_UNROLL
    for (int k = 0; k < LU; ++k) bk[k] = small_swz(1 << (lsl + k + LP)) << 2;
    const int sa = small_swz(a0) << 2, sj = small_swz(j0) << 2;
#pragma unroll 1
    for (int io = 0; io < I; io += U) {
      const int b = small_swz((sl + (io << lsl)) << LP) << 2;
      int os = b ^ sa, oh = b ^ sj;
      SK_KRON_UNROLL
      for (int i = 0; i < U; ++i) {
        if (i > 0) {
          os ^= bk[ctz_c(i)];
          oh ^= bk[ctz_c(i)];
        }
        float sv[4], hv[4];
        lds4(reinterpret_cast<const float*>(sbb + os), sv);
        lds4(reinterpret_cast<const float*>(hbb + oh), hv);
        SK_KRON_UNROLL
        for (int u = 0; u < 4; ++u) {
          SK_KRON_UNROLL
          for (int v = 0; v < 4; ++v) c[u * 4 + v] += sv[u] * hv[v];
        }
      }
    }
  } else {
    // Group q = four fibers f = 4q … 4q + 3 (lo = f mod s, consecutive: s ≥ 4), fiber f starting at
    // element hi·P·s + lo of its row, hi = f / s.
    constexpr int I = P / 2, LI = ilog2c(I);  // groups per thread (2 … 16), all unrolled
    const int lg = ln - LP - 2;  // log2 groups per row
    const int lo_mask = (1 << ls) - 1;
    auto first = [&](int q) {  // byte offset of group q's first element
      const int r = q >> lg, f = (q & ((1 << lg) - 1)) << 2;
      return small_swz((r << ln) + ((f >> ls) << (ls + LP)) + (f & lo_mask)) << 2;
    };
    int bk[LI];
    SK_KRON_UNROLL
    for (int k = 0; k < LI; ++k) bk[k] = first(1 << (lsl + k));
    const int b0 = first(sl);
    int os[4], oh[4];  // running byte offsets of elements a0 + u and j0 + u of the current group
    SK_KRON_UNROLL
    for (int u = 0; u < 4; ++u) {
      os[u] = b0 ^ (small_swz((a0 + u) << ls) << 2);
      oh[u] = b0 ^ (small_swz((j0 + u) << ls) << 2);
    }
    SK_KRON_UNROLL
    for (int i = 0; i < I; ++i) {
      if (i > 0) {
        SK_KRON_UNROLL
        for (int u = 0; u < 4; ++u) {
          os[u] ^= bk[ctz_c(i)];
          oh[u] ^= bk[ctz_c(i)];
        }
      }
      float sv[4][4], hv[4][4];  // [element][fiber]
      SK_KRON_UNROLL
      for (int u = 0; u < 4; ++u) {
        lds4(reinterpret_cast<const float*>(sbb + os[u]), sv[u]);
        lds4(reinterpret_cast<const float*>(hbb + oh[u]), hv[u]);
      }
      small_dF_group(sv, hv, c);
    }
  }
  SK_KRON_UNROLL
  for (int k = 0; k < 16; ++k) acc[k] = c[k];
}

/// The contraction pass of mode 0 in the lean pool: as small_dF_pass's s > 1 path, with s read
/// from X in global memory (rows of the tile past M read as zeros; 16-byte loads where vec_x).
template <int P>
SK_KRON_FN void small_dF_pass_x(const SmallArgs& a, long long tile, const float* hb, int tid, int nt, float* acc) {
  constexpr int LP = ilog2c(P), PB = P / 4, NB = PB * PB;
  const int slices = nt / NB;
  const int sl = tid % slices, blk = tid / slices;
  const int a0 = (blk / PB) * 4, j0 = (blk % PB) * 4;
  const int ls = a.md[0].ls;  // ≥ 2: mode 0's stride is the product of the other modes' p
  const char* const hbb = reinterpret_cast<const char*>(hb);
  int oh[4];
  SK_KRON_UNROLL
  for (int u = 0; u < 4; ++u) oh[u] = small_swz((j0 + u) << ls) << 2;
  float c[16];
  SK_KRON_UNROLL
  for (int k = 0; k < 16; ++k) c[k] = acc[k];
  const int lg = a.ln - LP - 2;
  const int groups = a.rows << lg;
  const int lo_mask = (1 << ls) - 1;
  for (int q = sl; q < groups; q += slices) {
    const int r = q >> lg, f = (q & ((1 << lg) - 1)) << 2;
    const int e = ((f >> ls) << (ls + LP)) + (f & lo_mask);
    const int b = small_swz((r << a.ln) + e) << 2;
    const long long m = tile * a.rows + r;
    const bool valid = m < a.M;
    const float* const xr = a.x + (valid ? m : 0) * a.ldx + e;
    float sv[4][4], hv[4][4];
    SK_KRON_UNROLL
    for (int u = 0; u < 4; ++u) {
      const float* const src = xr + ((a0 + u) << ls);
      if (!valid) {
        SK_KRON_UNROLL
        for (int w = 0; w < 4; ++w) sv[u][w] = 0.0f;
      } else if (a.vec_x != 0) {
#if defined(__CUDA_ARCH__)
        const float4 t4 = __ldg(reinterpret_cast<const float4*>(src));
        sv[u][0] = t4.x; sv[u][1] = t4.y; sv[u][2] = t4.z; sv[u][3] = t4.w;
#else
        SK_KRON_UNROLL
        for (int w = 0; w < 4; ++w) sv[u][w] = src[w];
#endif
      } else {
        SK_KRON_UNROLL
        for (int w = 0; w < 4; ++w) sv[u][w] = src[w];
      }
      lds4(reinterpret_cast<const float*>(hbb + (b ^ oh[u])), hv[u]);
    }
    small_dF_group(sv, hv, c);
  }
  SK_KRON_UNROLL
  for (int k = 0; k < 16; ++k) acc[k] = c[k];
}

/// The block's ∂ℓ/∂Fₜ: every thread's 16 sums go to `scratch` (slot (blk·16 + k)·(slices + 1) + sl),
/// then each element (a, j) adds its slices in order into partial[block·part_stride + part_off[t] +
/// a·p + j]. The row stride slices + 1 (odd) puts the rows that a warp's summing threads read at one
/// time in different banks: with a stride of `slices` (32 at p = 8) all 32 lanes read one bank, a
/// 32-way conflict on each of their loads (ncu, session 33: 2.17 M of the backward's 6.17 M
/// shared-load wavefronts at 1024 × (8⊗8⊗8⊗8)). The writes: consecutive sl in consecutive banks
/// (with 8 slices, p = 16, the rows of a warp's four blocks now meet two to a bank, four before).
template <class Exec>
SK_KRON_FN void small_bwd_reduce(const SmallBwdArgs& b, Exec& ex, float* scratch, long long block) {
  const SmallArgs& a = b.a;
  const int nt = ex.nthreads();
  for (int t = 0; t < a.nf; ++t) {
    if (((b.want_f >> t) & 1) == 0) continue;
    const int p = a.md[t].p, pb = p / 4, nb = pb * pb, slices = nt / nb;
    ex.phase([&](int tid, SmallBwdRegs& r) {
      const int sl = tid % slices, blk = tid / slices;
      for (int k = 0; k < 16; ++k) scratch[(blk * 16 + k) * (slices + 1) + sl] = r.acc[t][k];
    });
    ex.phase([&](int tid, SmallBwdRegs&) {
      float* const dst = b.partial + block * b.part_stride + b.part_off[t];
      for (int e = tid; e < p * p; e += nt) {
        const int i = e / p, j = e % p;
        const int blk = (i / 4) * pb + j / 4, k = (i % 4) * 4 + j % 4;
        const float* src = scratch + (blk * 16 + k) * (slices + 1);
        float sum = 0.0f;
        for (int s = 0; s < slices; ++s) sum += src[s];
        dst[e] = sum;
      }
    });
  }
}

/// The block program. `Exec` as in kron_fast.h, with SmallBwdRegs per thread.
/// Buffers (see the file comment): a pool of nf + 1 tiles (nf + 2 for two modes) whose roles rotate.
/// S⁽ⁿ⁻¹⁾ is dead once ∂ℓ/∂Fₙ₋₁ is done, S⁽ⁿ⁻²⁾ once ∂ℓ/∂Fₙ₋₂ is: the next tile's X and ∂ℓ/∂Y load
/// into those two (two modes: the spare buffer takes ∂ℓ/∂Y), during the rest of this tile's passes,
/// and this tile's X, ∂ℓ/∂Y and remaining states become the next tile's states. The role indices
/// are the same in every thread (computed outside the phases).
/// LEAN: the lean pool (SmallBwdArgs::lean, which must agree), a separate instantiation so that
/// the default pool's code is exactly what was measured.
/// UP > 0 (not with LEAN): every factor is UP × UP and there are NF of them (with_small_shape): the
/// mode loops unroll, each pass with its stride and the row length as compile-time constants.
/// NT > 0: the CUDA kernel's block size (0: ex.nthreads()); with UP it makes the tile copies' trip
/// counts constants (small_issue_rows).
template <int PMAX, bool LEAN, int UP = 0, int NF = 0, int NT = 0, class Exec>
SK_KRON_PROGRAM void small_backward_program(const SmallBwdArgs& b, Exec& ex, float* sm, long long block,
                                            long long grid) {
  static_assert(UP == 0 || !LEAN, "the lean pool has no uniform-shape kernel");
  using Regs = SmallBwdRegs;
  const SmallArgs& a = b.a;
  const int nt = NT > 0 ? NT : ex.nthreads();
  const int nf = NF > 0 ? NF : a.nf;
  constexpr int kLN = UP > 0 ? NF * ilog2c(UP) : -1;  // log2 N where the shape is uniform
  // The uniform (8)^4 passes write their outputs four at a time (small_pass_io's kChunk; the
  // (16)^3 backward measured slower that way).
  constexpr bool kChunk = UP == 8;
  const bool want_gx = a.y != nullptr;
  // Roles: ix, ig (X, ∂ℓ/∂Y), is[t] for t = 1 … nf−1 (S⁽ᵗ⁾), spare (two modes only).
  // Lean pool (nf ≥ 3): no X buffer; X arrives in S⁽¹⁾'s buffer and the first pass runs in place.
  constexpr bool lean = LEAN;
  int ix = 0, ig = 1, spare = nf == 2 ? 3 : -1;
  int is[kSmallMaxModes] = {};
  for (int t = 1; t < nf; ++t) is[t] = 1 + t;
  if (lean) {
    ig = 0;
    for (int t = 1; t < nf; ++t) is[t] = t;
    ix = is[1];
  }
  auto buf = [&](int k) { return sm + b.off_buf[k]; };
  // f(t) for the modes t = 0 … nf − 1 (up) or nf − 1 … 0 (down); t an IntC when the shape is
  // uniform, and `with_p(t, g)` calls g(IntC<p>, IntC<log2 s>, IntC<log2 N>) for mode t (−1: read
  // at run time).
  auto modes_up = [&](auto&& f) {
    if constexpr (UP > 0)
      for_c<NF>([&](auto i) { f(i); });
    else
      for (int t = 0; t < nf; ++t) f(t);
  };
  auto modes_down = [&](auto&& f) {
    if constexpr (UP > 0)
      for_c<NF>([&](auto i) { f(IntC<NF - 1 - decltype(i)::value>{}); });
    else
      for (int t = nf - 1; t >= 0; --t) f(t);
  };
  auto with_p = [&](auto tc, auto&& g) {
    if constexpr (UP > 0) {
      constexpr int t = decltype(tc)::value, LP = ilog2c(UP);
      g(IntC<UP>{}, IntC<(NF - 1 - t) * LP>{}, IntC<NF * LP>{});
    } else {
      with_small_p<PMAX>(a.md[tc].p, [&](auto pc) { g(pc, IntC<-1>{}, IntC<-1>{}); });
    }
  };
  ex.phase_nosync([&](int tid, Regs& r) {
    if (block < a.ntiles) {
      small_issue_x<kLN, NT>(a, buf(ix), block, tid, nt);
      small_issue_rows<false, kLN, NT>(a, b.g, b.ldg, b.vec_g, buf(ig), block, tid, nt);
    }
    small_load_factors(a, sm, tid, nt);
    small_load_factors_plain(b, sm, tid, nt);
    async_commit();
    for (int t = 0; t < kSmallMaxModes; ++t)
      for (int k = 0; k < 16; ++k) r.acc[t][k] = 0.0f;
  });
  for (long long tile = block; tile < a.ntiles; tile += grid) {
    const long long next = tile + grid;
    const bool more = next < a.ntiles;
    float* const xb = buf(ix);
    float* const gb = buf(ig);
    // This tile's X and ∂ℓ/∂Y have arrived (every thread waits for its own copies, the barrier for
    // all, which also ends the previous tile).
    ex.phase([&](int, Regs&) { async_wait<0>(); });
    // S⁽ᵗ⁺¹⁾ = S⁽ᵗ⁾ ×ₜ Fₜ for t = 0 … n−2, each into its own buffer (lean: S⁽¹⁾ over X in place).
    modes_up([&](auto tc) {
      const int t = tc;
      if (t + 1 >= nf) return;
      const float* src = t == 0 ? xb : buf(is[t]);
      float* const dst = buf(is[t + 1]);
      ex.phase([&](int tid, Regs&) {
        with_p(tc, [&](auto pc, auto lsc, auto lnc) {
          small_pass_io<decltype(pc)::value, false, decltype(lsc)::value, decltype(lnc)::value, -1, kChunk>(
              a, t, a.md[t].f_off, tile, sm, src, dst, tid, false, nullptr, 0, 0);
        });
      });
    });
    modes_down([&](auto tc) {
      const int t = tc;
      if ((b.want_f >> t) & 1) {
        const float* sb = t == 0 ? xb : buf(is[t]);
        ex.phase([&](int tid, Regs& r) {
          with_p(tc, [&](auto pc, auto lsc, auto lnc) {
            constexpr int P = decltype(pc)::value;
            if constexpr (LEAN) {
              if (t == 0)  // X is no longer in shared memory: from global memory (L2)
                small_dF_pass_x<P>(a, tile, gb, tid, nt, r.acc[0]);
              else
                small_dF_pass<P>(a, t, sb, gb, tid, nt, r.acc[t]);
            } else {
              small_dF_pass<P, decltype(lsc)::value, decltype(lnc)::value>(a, t, sb, gb, tid, nt, r.acc[t]);
            }
          });
        });
      }
      // The next tile's copies go where this tile's states are dead: S⁽ⁿ⁻¹⁾ after mode n−1's
      // contraction (its last reader, before the barrier above; or the recompute pass that wrote
      // it), S⁽ⁿ⁻²⁾ after mode n−2's (n ≥ 3; two modes: the spare buffer).
      float* const nx = more && t == nf - 1 ? buf(is[nf - 1]) : nullptr;
      float* const ng = !more ? nullptr : nf == 2 ? (t == 1 ? buf(spare) : nullptr) : (t == nf - 2 ? buf(is[nf - 2]) : nullptr);
      if (t > 0 || want_gx) {
        const bool final_pass = t == 0;
        ex.phase([&](int tid, Regs&) {
          if (nx != nullptr || ng != nullptr) {
            if (nx != nullptr) small_issue_x<kLN, NT>(a, nx, next, tid, nt);
            if (ng != nullptr) small_issue_rows<false, kLN, NT>(a, b.g, b.ldg, b.vec_g, ng, next, tid, nt);
            async_commit();
          }
          with_p(tc, [&](auto pc, auto lsc, auto lnc) {
            small_pass_io<decltype(pc)::value, false, decltype(lsc)::value, decltype(lnc)::value, -1, kChunk>(
                a, t, b.f2_off[t], tile, sm, gb, gb, tid, final_pass, a.y, a.ldy, a.vec_y);
          });
        });
      }
    });
    // The roles of the next tile (see above).
    if constexpr (LEAN) {  // next X in the old S⁽ⁿ⁻¹⁾ (the next S⁽¹⁾), next ∂ℓ/∂Y in the old S⁽ⁿ⁻²⁾
      const int og = ig, nx_i = is[nf - 1], ng_i = is[nf - 2];
      for (int t = nf - 1; t >= 3; --t) is[t] = is[t - 2];
      is[2] = og;
      is[1] = nx_i;
      ix = nx_i;
      ig = ng_i;
    } else if (nf == 2) {
      const int ox = ix, og = ig;
      ix = is[1];
      ig = spare;
      is[1] = ox;
      spare = og;
    } else {
      const int ox = ix, og = ig, nx_i = is[nf - 1], ng_i = is[nf - 2];
      for (int t = nf - 1; t >= 3; --t) is[t] = is[t - 2];
      is[1] = ox;
      is[2] = og;
      ix = nx_i;
      ig = ng_i;
    }
  }
  ex.phase([&](int, Regs&) {
    pdl_launch_dependents();  // the reduction of the partials may start launching
    async_wait<0>();          // no copy outlives the tiles; every buffer is free
  });
  small_bwd_reduce(b, ex, buf(0), block);
}

}  // namespace sparsekern::kron::detail
