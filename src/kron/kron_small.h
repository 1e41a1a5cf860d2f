#pragma once
// Fiber-per-thread fused forward for small square factors (fp32, one group over every mode, L = 1):
// the block program shared by the CUDA kernel (kron_small_fwd_f32.cu) and the CPU backend's
// emulation (kron_matmul_cpu.cpp).
//
// Why a third forward kernel. With factors of 8 or 16 rows the two other fused kernels run at a
// quarter of the roofline (H200, 1024 × (8⊗8⊗8⊗8) and (16⊗16⊗16): ~30 µs against ~8 µs). ncu
// (session 10) shows both issue-bound on index arithmetic, not on FFMAs or memory: the register-tile
// kernel spends about half of its stall samples in the loop that copies X transposed with 4-byte
// cp.async (a row and bounds check per element), runs 2 warps per scheduler (167 registers), and
// the generic kernel executes ~3 integer instructions per FFMA. This program does the least index
// work per element that the product allows:
//   - a tile is R rows of X (R·N = 32·threads elements), copied with 16-byte cp.async straight into
//     its natural (row-major) layout, two tiles in flight (the next one loads during this one);
//   - every mode t is one *pass*: a thread owns E = 32 elements of each row it serves, as 32/p
//     whole fibers of mode t (the p elements that mode t contracts, s = Π_{u>t} p_u apart), reads
//     them into registers, computes y[j] = Σ_a F_t[a, j] · x[a] for every fiber, and writes the
//     results back in place — no other thread touches those elements in this pass, so a pass needs
//     no barrier inside it, one between passes;
//   - the factors live transposed in shared memory, F_t[:, j] contiguous, read as uniform 16-byte
//     vectors (one address per warp);
//   - the first mode (the final pass) stores Y straight from registers: its fibers' elements are
//     s = N/p_0 ≥ 32 apart, so the 32 lanes store 32 consecutive floats (full sectors).
// Fibers of a pass. Fiber f = hi·s + lo (hi < N/(p·s), lo < s) holds elements hi·p·s + a·s + lo.
// For s = 1 a thread owns whole fibers (p contiguous floats, 16-byte vectors); for s > 1 groups of
// G = min(32/p, 4) fibers with consecutive lo, so that element a of a group is one G-float vector
// (small_pass). Either way a warp's lanes own consecutive fibers or groups.
// Banks. Element e of a tile sits at swz(e): its 16-byte chunk within a 128-byte row r = e/32 is
// XORed with h(r) = (r mod 8) ^ 4·(bit 3 of r). A Python model of the three access kinds
// (tools/diag/kron_small_banks.py:
// scalar, vector along a fiber, the 16-byte copies) finds no bank conflict for (8,8,8,8),
// (16,16,16), (32,32), (8,16,32), (16,8,8) and most other mixes of 4 … 32 with 1024 ≤ N ≤ 8192
// (some mixes keep 2-way conflicts in one pass).
// Scope (planner: plan_small): fp32, every factor square with p ∈ {4, 8, 16, 32}, 1024 ≤ N = Π p ≤
// 8192 (a thread owns 32 elements of a row: N/32 threads per row, at most the block).
// Uniform shapes. One kernel serves every mix of widths, reading each pass's stride (log2 s) and
// the row length from the arguments; for (8⊗8⊗8⊗8) and (16⊗16⊗16) there are instantiations in
// which both are compile-time constants and the passes unroll (with_small_shape, at the end): the
// per-pass address setup folds into constants, 16-19% faster at 1024-4096 rows (session 38).

#include "kron_fast.h"
#include "kron_internal.h"

namespace sparsekern::kron::detail {

/// The block program needs no registers across barriers (a pass reads, computes and writes back
/// its own elements between two barriers).
struct SmallRegs {};

/// Elements a thread owns per row in a pass.
constexpr int kSmallE = 32;

/// Shared-memory position of element e of a tile (see the file comment): the 16-byte chunk index
/// within each 128-byte row XORed with a function of the row.
SK_KRON_HD int small_swz(int e) {
  // h(r) = (r mod 8) ^ 4·(bit 3 of r) for r = e / 32, shifted to the chunk bits: e ^ (h(r) << 2).
  return e ^ ((e >> 3) & 0x1c) ^ ((e >> 4) & 0x10);
}

/// Trailing zero bits of v > 0 (compile-time where v is).
SK_KRON_HD constexpr int ctz_c(int v) { return (v & 1) != 0 ? 0 : 1 + ctz_c(v >> 1); }

/// Trailing zero bits of a runtime v > 0 (one instruction or two, where ctz_c would loop).
SK_KRON_HD int ctz_rt(int v) {
#if defined(__CUDA_ARCH__)
  return __ffs(v) - 1;
#else
  return __builtin_ctz(static_cast<unsigned>(v));
#endif
}

SK_KRON_FN int ilog2_rt(int v) {
  int l = 0;
  while ((1 << l) < v) ++l;
  return l;
}

/// Copies factor t transposed into shared memory (Ft[j·p + a] = F[a, j]), asynchronously.
SK_KRON_FN void small_load_factors(const SmallArgs& a, float* sm, int tid, int nt) {
  for (int t = 0; t < a.nf; ++t) {
    const SmallMode& md = a.md[t];
    const int p = md.p, lp = ilog2_rt(p);
    for (int e = tid; e < p * p; e += nt) {
      const int j = e >> lp, i = e & (p - 1);
      copy4_async(sm + md.f_off + e, md.f + i * md.f_rs + j * md.f_cs, true);
    }
  }
}

/// Starts the copy of tile `tile` (rows tile·R …) of X into `buf` (rows past M zero-filled). A
/// block sweeps a row in steps of 4·nt floats (≤ N), thread tid at offset 4·tid of each step; the
/// step offsets' bits lie above 4·tid's, so the swizzle splits: swz(e0 + k·step) = swz(e0) ^ swz(k·step).
/// With nt ≥ 128 (the plans and the kernels have 128 or 256 threads) step is a multiple of 512
/// floats, whose rows (e / 32) are multiples of 16: h of them is 0 and swz(k·step) = k·step, so
/// the destination advances by `step` like the source (the loop does no swizzle arithmetic per
/// copy; session 33's ncu counted ~15 instructions per 16-byte copy with it and with the scalar
/// path's four copies predicated off beside the vector one, now a loop of its own).
/// The trip counts: N / (4·nt) steps per row and R = 32·nt / N rows (the plan's a.rows). LN ≥ 0 and
/// NT > 0 (the uniform-shape kernels: log2 N and the block size known at compile time): both are
/// constants and the loops unroll; otherwise a runtime division (~35 instructions per tile in
/// session 39's SASS; a shift instead, nt being a power of two, made ptxas spill 8 bytes in the
/// generic p ≤ 16 forward, so the generic kernels keep it).
/// small_issue_rows: the same for another M × N operand (x, row stride ld, vec: 16-byte copies
/// allowed); kFwd reads X's from `a` instead (the forward's call).
template <bool kFwd = false, int LN = -1, int NT = 0>
SK_KRON_FN void small_issue_rows(const SmallArgs& a, const float* x, long long ld, int vec, float* buf,
                                 long long tile, int tid, int nt) {
  constexpr bool kConst = LN >= 0 && NT > 0;
  const int ln = LN >= 0 ? LN : a.ln;
  const int step = nt << 2, e0 = tid << 2;  // nt == NT where NT > 0 (the programs pass it)
  const int per_row = kConst ? 1 << (ln - ilog2c(NT) - 2) : (1 << ln) / step;
  const int rows = kConst ? (32 * NT) >> ln : a.rows;
  const int s0 = small_swz(e0);
  const long long m0 = tile * rows;
  const bool v16 = kFwd ? a.vec_x != 0 : vec != 0;
  for (int r = 0; r < rows; ++r) {
    const long long m = m0 + r;
    const bool valid = m < a.M;
    const float* src = (kFwd ? a.x : x) + (valid ? m : 0) * (kFwd ? a.ldx : ld) + e0;
    float* dst = buf + (r << ln) + s0;
    if (v16) {
      for (int k = 0; k < per_row; ++k, src += step, dst += step) copy16_async(dst, src, valid);
    } else {
      for (int k = 0; k < per_row; ++k, src += step, dst += step)
        for (int u = 0; u < 4; ++u) copy4_async(dst + u, src + u, valid);
    }
  }
}

template <int LN = -1, int NT = 0>
SK_KRON_FN void small_issue_x(const SmallArgs& a, float* buf, long long tile, int tid, int nt) {
  small_issue_rows<true, LN, NT>(a, nullptr, 0, 0, buf, tile, tid, nt);
}

/// G consecutive floats from / to shared memory (G = 1, 2 or 4; 16-byte aligned for 4, 8 for 2).
template <int G>
SK_KRON_FN void lds_g(const float* p, float* o) {
  if constexpr (G == 4) {
    lds4(p, o);
  } else if constexpr (G == 2) {
#if defined(__CUDA_ARCH__)
    const float2 t = *reinterpret_cast<const float2*>(p);
    o[0] = t.x; o[1] = t.y;
#else
    o[0] = p[0]; o[1] = p[1];
#endif
  } else {
    o[0] = *p;
  }
}

template <int G>
SK_KRON_FN void sts_g(float* p, const float* v) {
  if constexpr (G == 4) {
    sts4(p, v[0], v[1], v[2], v[3]);
  } else if constexpr (G == 2) {
#if defined(__CUDA_ARCH__)
    *reinterpret_cast<float2*>(p) = make_float2(v[0], v[1]);
#else
    p[0] = v[0]; p[1] = v[1];
#endif
  } else {
    *p = v[0];
  }
}

/// G consecutive floats of a final pass to global memory: 16-byte (G = 4) or 8-byte (G = 2: 16 ⊗ …)
/// stores where the rows allow 16-byte ones (vec), so that one warp instruction writes whole sectors
/// (as scalars, two instructions wrote every other float); scalars otherwise.
template <int G>
SK_KRON_FN void stg_g(float* o, const float* v, bool vec) {
  if (G == 4 && vec) {
    stg4(o, v[0], v[1], v[2], v[3]);
  } else if (G == 2 && vec) {
    stg2(o, v[0], v[1]);
  } else {
    SK_KRON_UNROLL
    for (int u = 0; u < G; ++u) o[u] = v[u];
  }
}

/// One pass of mode t (factor width P) over the thread's fibers of its row: in place in `buf`, or
/// (final pass) into Y.
/// Which fibers. s = 1 (the last mode): fiber f = tau + v·T, its p floats contiguous, read and
/// written as 16-byte vectors. s > 1 (s ≥ 4): G = min(32/p, 4) fibers with consecutive lo per
/// vector, f = G·(tau + g·T) + u, so that element a of the G fibers is one G-float vector (the
/// bank model covers these maps too).
/// Addresses: swz is linear over GF(2) (an XOR of bit fields) and a fiber's elements e = base | a·s
/// have disjoint bits (base's bits [log2 s, log2(p·s)) are zero), so swz(e) = swz(base) ^ swz(a·s):
/// one XOR per element (or vector) instead of the integer instructions of swz itself. The row
/// offset row·N sits above every bit swz touches.
/// This is small_pass_io, the general form (small_pass below is the forward's): the factor copy at
/// `f_off` (the backward's pull-back passes read the untransposed copy, which makes the pass
/// y[a] = Σ_j F[a, j] · x[j]), the results written to
/// `dst` (same layout; dst = buf: in place) or, in a final pass, to `out` (row stride ldo, vec_o:
/// 16-byte stores allowed). kFwd (the forward's call) reads these from `a` instead: the forward's
/// SASS stays exactly as it was measured (session 11 compared it).
/// LS, LN ≥ 0: log2 s and log2 N known at compile time (the uniform-shape kernels: every address
/// offset below then folds into constants); −1: read from `a`. VO ≥ 0: the final pass's store form
/// (vec_o / a.vec_y) fixed at compile time, so the other form's stores are not issued predicated
/// off beside it. kChunk: the outputs summed and written four j at a time (below).
template <int P, bool kFwd = false, int LS = -1, int LN = -1, int VO = -1, bool kChunk = false>
SK_KRON_FN void small_pass_io(const SmallArgs& a, int t, int f_off, long long tile, const float* sm, const float* buf,
                              float* dst, int tid, bool final_pass, float* out, long long ldo, int vec_o) {
  constexpr int V = kSmallE / P;
  constexpr int G = V < 4 ? V : 4;
  constexpr int LP = ilog2c(P), LG = ilog2c(G);
  const SmallMode& md = a.md[t];
  const int ls = LS >= 0 ? LS : md.ls;  // log2 s
  const int ln = LN >= 0 ? LN : a.ln;   // log2 N
  const int lT = ln - 5;  // log2 threads per row
  const int row = tid >> lT, tau = tid & ((1 << lT) - 1);
  // Byte offsets within the tile buffer, so that an element's address is one XOR away from its
  // fiber's (the buffer's own address then adds in the load's addressing). For s > 1 the elements
  // go in Gray-code order, each address one basis XOR from the previous: bas[b] = 4·swz(2^b · s).
  int bas[LP];
  SK_KRON_UNROLL
  for (int b = 0; b < LP; ++b) bas[b] = small_swz(1 << (ls + b)) << 2;
  const char* const bb = reinterpret_cast<const char*>(buf);
  char* const bw = kFwd ? const_cast<char*>(bb) : reinterpret_cast<char*>(dst);
  // Fiber f = hi·s + lo starts at element hi·p·s + lo: f with LP zero bits inserted at bit ls.
  const int lo_mask = (1 << ls) - 1, hi_mask = ~((1 << (ls + LP)) - 1);
  // Fiber v's element a is x[v / G][a][v % G] (and y likewise): the G fibers of a group sit in
  // neighbouring registers for the G-float vectors of the s > 1 path.
  float x[V / G][P][G];
  int base[V], pb[V];  // per fiber (s = 1) or per group of G fibers (s > 1: entries 0 … V/G − 1)
  if (ls == 0) {
    SK_KRON_UNROLL
    for (int v = 0; v < V; ++v) {
      base[v] = (tau + (v << lT)) << LP;
      pb[v] = ((row << ln) + small_swz(base[v])) << 2;
      SK_KRON_UNROLL
      for (int k = 0; k < P / 4; ++k) {
        float v4[4];
        lds4(reinterpret_cast<const float*>(bb + (pb[v] ^ (16 * k))), v4);
        SK_KRON_UNROLL
        for (int u = 0; u < 4; ++u) x[v / G][4 * k + u][v % G] = v4[u];
      }
    }
  } else {
    SK_KRON_UNROLL
    for (int g = 0; g < V / G; ++g) {
      const int f = (tau + (g << lT)) << LG;
      base[g] = (f & lo_mask) | ((f << LP) & hi_mask);
      pb[g] = ((row << ln) + small_swz(base[g])) << 2;
      SK_KRON_UNROLL
      for (int k = 0, ad = pb[g]; k < P; ++k) {
        if (k > 0) ad ^= bas[ctz_c(k)];
        lds_g<G>(reinterpret_cast<const float*>(bb + ad), x[g][k ^ (k >> 1)]);
      }
    }
  }
  const float* ft = sm + (kFwd ? md.f_off : f_off);
  // Output j of every fiber, y[·][slot][·] = Σ_a F[a, j] · x[·][a][·], the factor column read as
  // 16-byte vectors (one address per warp).
  auto sum_j = [&](int j, auto& y, int slot) {
    SK_KRON_UNROLL
    for (int v = 0; v < V; ++v) y[v / G][slot][v % G] = 0.0f;
    SK_KRON_UNROLL
    for (int k = 0; k < P / 4; ++k) {
      float f4[4];
      lds4(ft + j * P + 4 * k, f4);
      SK_KRON_UNROLL
      for (int v = 0; v < V; ++v) {
        SK_KRON_UNROLL
        for (int u = 0; u < 4; ++u) y[v / G][slot][v % G] += x[v / G][4 * k + u][v % G] * f4[u];
      }
    }
  };
  if constexpr (kChunk && LS >= 0 && LN >= 0) {
    // kChunk (uniform shapes): the outputs in chunks of four j, each chunk written as soon as it
    // is summed (the inputs are all in registers by now and no other thread reads them in this
    // pass), so that 4·V sums are live instead of P·V; every address below is a constant offset.
    // The forward's kernels then take 112 registers instead of 128. H200, device µs, session 39:
    // forward (16)^3 1024 rows 14.6 → 13.9-14.2, 4096 rows 52.0 → 49.7-50.4, (8)^4 1024 rows
    // 11.2 → 10.7-10.8, 4096 rows 39.1 → 38.2-38.4; backward (8)^4 1024 rows 44.2 → 42.7-43.1,
    // 4096 rows 141 → 135, but (16)^3 1024 rows 50.3 → 54.1-54.6 (its backward keeps the
    // full-row form).
    const long long m = tile * a.rows + row;
    if (final_pass && m >= a.M) return;
    float* const yr = final_pass ? (kFwd ? a.y + m * a.ldy : out + m * ldo) : nullptr;
    const bool vec = VO >= 0 ? VO != 0 : (kFwd ? a.vec_y : vec_o) != 0;
    SK_KRON_UNROLL
    for (int jc = 0; jc < P / 4; ++jc) {
      float yc[V / G][4][G];
      SK_KRON_UNROLL
      for (int jj = 0; jj < 4; ++jj) sum_j(4 * jc + jj, yc, jj);
      if (!final_pass) {
        if (ls == 0) {
          SK_KRON_UNROLL
          for (int v = 0; v < V; ++v)
            sts4(reinterpret_cast<float*>(bw + (pb[v] ^ (16 * jc))), yc[v / G][0][v % G], yc[v / G][1][v % G],
                 yc[v / G][2][v % G], yc[v / G][3][v % G]);
        } else {
          SK_KRON_UNROLL
          for (int g = 0; g < V / G; ++g) {
            SK_KRON_UNROLL
            for (int jj = 0; jj < 4; ++jj) {
              const int j = 4 * jc + jj;
              int off = 0;  // swz(j·s) in bytes: the basis offsets of j's bits
              SK_KRON_UNROLL
              for (int b = 0; b < LP; ++b)
                if ((j >> b) & 1) off ^= bas[b];
              sts_g<G>(reinterpret_cast<float*>(bw + (pb[g] ^ off)), yc[g][jj]);
            }
          }
        }
      } else {
        SK_KRON_UNROLL
        for (int g = 0; g < V / G; ++g) {
          SK_KRON_UNROLL
          for (int jj = 0; jj < 4; ++jj) {
            stg_g<G>(yr + base[g] + ((4 * jc + jj) << ls), yc[g][jj], vec);
          }
        }
      }
    }
  } else {  // the whole row of outputs at once, then written
    float y[V / G][P][G];
    SK_KRON_UNROLL
    for (int j = 0; j < P; ++j) sum_j(j, y, j);
    if (!final_pass) {
      if (ls == 0) {
        SK_KRON_UNROLL
        for (int v = 0; v < V; ++v) {
          SK_KRON_UNROLL
          for (int k = 0; k < P / 4; ++k)
            sts4(reinterpret_cast<float*>(bw + (pb[v] ^ (16 * k))), y[v / G][4 * k][v % G], y[v / G][4 * k + 1][v % G],
                 y[v / G][4 * k + 2][v % G], y[v / G][4 * k + 3][v % G]);
        }
      } else {
        SK_KRON_UNROLL
        for (int g = 0; g < V / G; ++g) {
          SK_KRON_UNROLL
          for (int k = 0, ad = pb[g]; k < P; ++k) {
            if (k > 0) ad ^= bas[ctz_c(k)];
            sts_g<G>(reinterpret_cast<float*>(bw + ad), y[g][k ^ (k >> 1)]);
          }
        }
      }
      return;
    }
    // Final pass (t = 0: s = N/p_0 ≥ 32, hi = 0): Y[m, j·s + lo], G consecutive lo per store.
    const long long m = tile * a.rows + row;
    if (m >= a.M) return;
    float* yr = kFwd ? a.y + m * a.ldy : out + m * ldo;
    const bool vec = VO >= 0 ? VO != 0 : (kFwd ? a.vec_y : vec_o) != 0;
    SK_KRON_UNROLL
    for (int g = 0; g < V / G; ++g) {
      SK_KRON_UNROLL
      for (int i = 0; i < P; ++i) {
        stg_g<G>(yr + base[g] + (i << ls), y[g][i], vec);
      }
    }
  }
}

template <int P, int LS = -1, int LN = -1, int VO = -1>
SK_KRON_FN void small_pass(const SmallArgs& a, int t, long long tile, const float* sm, float* buf, int tid,
                           bool final_pass) {
  small_pass_io<P, true, LS, LN, VO, (LS >= 0 && LN >= 0)>(a, t, 0, tile, sm, buf, buf, tid, final_pass, nullptr, 0, 0);
}

/// f(IntC<0>), …, f(IntC<N − 1>) in order.
template <int N, int I = 0, class F>
SK_KRON_FN void for_c(F&& f) {
  if constexpr (I < N) {
    f(IntC<I>{});
    for_c<N, I + 1>(f);
  }
}

/// Calls f(IntC<p>) for p ≤ PMAX (the planner's largest p: a kernel holds only the passes it can
/// run, so that the widest pass's registers and code do not weigh on products of narrow factors).
template <int PMAX, class F>
SK_KRON_FN void with_small_p(int p, F&& f) {
  if (p == 4) {
    f(IntC<4>{});
  } else if constexpr (PMAX >= 8) {
    if (p == 8) {
      f(IntC<8>{});
    } else if constexpr (PMAX >= 16) {
      if (p == 16) {
        f(IntC<16>{});
      } else if constexpr (PMAX >= 32) {
        f(IntC<32>{});
      }
    }
  }
}

/// Copies the tile's state after the last mode (two modes: T0 = X·F1 per row, a.t0) from `buf`.
SK_KRON_FN void small_store_t0(const SmallArgs& a, const float* buf, long long tile, int tid, int nt) {
  const int ln4 = a.ln - 2;
  const int chunks = a.rows << ln4;
  for (int c = tid; c < chunks; c += nt) {
    const int r = c >> ln4, e = (c - (r << ln4)) << 2;
    const long long m = tile * a.rows + r;
    if (m >= a.M) continue;
    float v[4];
    lds4(buf + (r << a.ln) + small_swz(e), v);
    stg4(a.t0 + m * a.ldt0 + e, v[0], v[1], v[2], v[3]);
  }
}

/// The block program. `Exec` as in kron_fast.h (phase: f(tid, regs) on every thread, then a barrier).
/// UP > 0: every factor is UP × UP and there are NF of them (with_small_shape): the passes are
/// unrolled, each with its stride and the row length as compile-time constants, and so are the
/// mode count and, with NT > 0 (the CUDA kernels' block size; 0: ex.nthreads()), the X copies' trip
/// counts (small_issue_rows). VY ≥ 0: a.vec_y (the final pass's store form) fixed at compile time.
template <int PMAX, int UP = 0, int NF = 0, int NT = 0, int VY = -1, class Exec>
SK_KRON_PROGRAM void small_forward_program(const SmallArgs& a, Exec& ex, float* sm, long long block,
                                           long long grid) {
  using Regs = SmallRegs;
  const int nt = NT > 0 ? NT : ex.nthreads();
  const int nf = NF > 0 ? NF : a.nf;
  constexpr int kLN = UP > 0 ? NF * ilog2c(UP) : -1;  // log2 N where the shape is uniform
  float* const b0 = sm + a.off_x0;
  float* const b1 = sm + a.off_x1;
  ex.phase_nosync([&](int tid, Regs&) {
    if (block < a.ntiles) small_issue_x<kLN, NT>(a, b0, block, tid, nt);
    small_load_factors(a, sm, tid, nt);
    async_commit();
  });
  long long i = 0;
  for (long long tile = block; tile < a.ntiles; tile += grid, ++i) {
    const long long next = tile + grid;
    float* const cur = (i & 1) ? b1 : b0;
    float* const nxt = (i & 1) ? b0 : b1;
    // This tile's X has arrived (every thread waits for its own copies, the barrier for all), and
    // every thread has finished the previous tile, whose buffer the next copy overwrites.
    ex.phase([&](int, Regs&) { async_wait<0>(); });
    // Mode t's pass (pass(tid, last) computes it) and the barrier after it.
    auto mode = [&](int t, auto&& pass) {
      const bool first = t == nf - 1, last = t == 0;
      ex.phase_nosync([&](int tid, Regs&) {
        if (first) {
          if (next < a.ntiles)
            small_issue_x<kLN, NT>(a, nxt, next, tid, nt);
          else
            pdl_launch_dependents();  // the block's last tile: a dependent grid may start launching
          async_commit();
        }
        if (last && nf == 2 && a.t0 != nullptr) small_store_t0(a, cur, tile, tid, nt);
        pass(tid, last);
      });
      if (!last) ex.sync();
    };
    if constexpr (UP > 0) {
      constexpr int LP = ilog2c(UP);
      for_c<NF>([&](auto i) {
        constexpr int t = NF - 1 - decltype(i)::value;
        mode(t, [&](int tid, bool last) { small_pass<UP, (NF - 1 - t) * LP, NF * LP, VY>(a, t, tile, sm, cur, tid, last); });
      });
    } else {
      // One call site (the barrier is separate): the passes inline once per factor width.
      for (int t = nf - 1; t >= 0; --t)
        mode(t, [&](int tid, bool last) {
          with_small_p<PMAX>(a.md[t].p, [&](auto pc) { small_pass<decltype(pc)::value>(a, t, tile, sm, cur, tid, last); });
        });
    }
  }
  ex.phase_nosync([&](int, Regs&) { async_wait<0>(); });  // no copy outlives the block
}

/// Calls f(IntC<PMAX>, IntC<UP>, IntC<NF>) for the instantiation of the small-factor forward or
/// backward (the same choice for both) that runs a.nf modes: a uniform-shape one (UP, NF) where
/// every factor is UP × UP, else (a.pmax's bound, 0, 0). Host code: the launchers and the CPU backend's emulation
/// pick the same kernel. Which, from session 38's H200 A/B (device µs, generic → uniform):
///   (8, 4), forward and backward: 16 rows 4.2 → 3.7, 256 rows 6.2 → 5.1, 1024 rows 14.4 → 11.8,
///     4096 rows 51.5 → 41.6; backward 1024 rows 52.9 → 49.0, 4096 rows 178 → 162;
///   (16, 3), from 256 rows: forward 256 rows 7.0 → 6.1, 1024 rows 18.3 → 15.4, but 64 rows
///     4.7 → 5.0 (a block's one tile pays for the larger code). The backward was slower then
///     (1024 rows 60.3 → 64.9: 120 bytes more of stack per thread); once the uniform kernels'
///     tile copies had constant trip counts (session 39: 448 bytes of stack, 68 of them spills,
///     against 408 for the generic kernel), faster: 1024 rows 60.0 → 50.2, 4096 rows 202.8 →
///     167.6, 256 rows 22.2 → 20.4, and 256 × (16)^4 (whose natural split ends in (16)^3 over 4096
///     rows) 376 → 347.
template <class F>
void with_small_shape(const SmallArgs& a, F&& f) {
  bool same = true;
  for (int t = 1; t < a.nf; ++t) same = same && a.md[t].p == a.md[0].p;
  if (same && a.nf == 4 && a.md[0].p == 8) {
    f(IntC<8>{}, IntC<8>{}, IntC<4>{});
    return;
  }
  if (same && a.nf == 3 && a.md[0].p == 16 && a.M >= 256) {
    f(IntC<16>{}, IntC<16>{}, IntC<3>{});
    return;
  }
  with_pmax(a.pmax, [&](auto pm) { f(pm, IntC<0>{}, IntC<0>{}); });
}

/// Calls f(IntC<VY>) with the final pass's store form of a forward instantiation with UP (see
/// with_small_shape): a.vec_y at compile time (1 / 0) in the uniform-shape kernels, −1 (read at run
/// time) elsewhere. Host code: the launcher and the CPU backend's emulation pick the same one.
template <int UP, class F>
void with_small_store_form(const SmallArgs& a, F&& f) {
  if constexpr (UP == 0)
    f(IntC<-1>{});
  else if (a.vec_y != 0)
    f(IntC<1>{});
  else
    f(IntC<0>{});
}

}  // namespace sparsekern::kron::detail
