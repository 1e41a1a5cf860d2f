#pragma once
// Register-tile fused forward of one group spanning every mode (L = 1), fp32: the block program shared
// by the CUDA kernel (kron_fast_fwd_f32.cu) and the CPU backend's emulation (kron_matmul_cpu.cpp).
//
// Why a second forward kernel. The generic fused forward (kron_tile.h) gives each lane its own rows
// and a warp one 8-column group of the factor: per 32 FFMAs a thread loads 4 scalars of the state
// and 8 factor values. Shared memory returns one 32-bit register per lane per clock per SM (uniform
// or pairwise-equal addresses return two), so its 6 loads per 32 FFMAs keep the shared-memory pipe
// about as busy as the FFMA pipe and the kernel runs at ~30% of the FFMA peak; its phases also wait
// for their own global loads. This program
//   - computes every mode as Out(j, n) = Σ_k F[k, j] · B(k, n) with 8×8 (or 4×4) register tiles,
//     both operands loaded as 16-byte vectors whose addresses are equal in lane pairs (the lane
//     layout below), so the pipe returns two registers per clock: 16 registers per 64 FFMAs cost
//     8 shared-memory clocks instead of 32;
//   - keeps one chunk buffer: a step reads it into registers, all threads meet at a barrier, then
//     write their tiles back in place (outputs per step ≤ 256 threads × the tile), so a block holds
//     twice the rows of a ping-pong design in the same shared memory;
//   - loads X with 16-byte cp.async in its natural order (4-byte ones where x's rows are not
//     16-byte aligned or p is not a multiple of 4; the last mode reads each row of X as 16-byte
//     vectors along k), one tile ahead when two tiles fit (`nstage` = 2), else during the
//     steps after the last mode, so the global loads of tile i+1 overlap the arithmetic of tile i.
//     Until session 18 X went through 4-byte copies into a transposed (k-major) layout: four times
//     the copy instructions plus their index arithmetic, ~15% of the stall samples of 4096 ×
//     (64 ⊗ 64) (benchmarks/results/kron-ncu-fwd-H100-2026-11-26-session18.txt);
//   - stores the first mode's (the final step's) tile from registers straight to Y: full 32-byte
//     sectors, no staging buffer and no barrier;
//   - runs a persistent grid (one or two blocks per SM) over tiles of `chunks` rows.
//
// Layouts (floats). A chunk is one row of X (L = 1). Step t reads the state T_t = (p_0 … p_t,
// q_{t+1} … q_{nf−1}) of every chunk as B(k, n), n = (chunk c, hi, lo), and writes T_{t−1}:
//   - the X tile, the input of the last step (s = 1): row n = c·H + hi holds X[m0 + c, hi·p + k],
//     k < p, at n·xp + k, zeros at p ≤ k < p4 (p4 = p rounded up to 4; xp = p4, or p4 + 4 where p4
//     is a multiple of 8, so xp ≡ 4 (mod 8)): the 16-byte vectors of one k group in eight
//     consecutive rows fall in eight different bank groups. (An XOR swizzle at pitch p would save
//     the padding, but it makes a lane's k order depend on its row, and then lanes that share a
//     factor vector no longer do: measured 4-way conflicts on the factor loads.)
//   - the state buffer: chunk c at c·cs; element e of T_t (natural order) at e + pad_t·⌊e / (p_t·s_t)⌋,
//     i.e. consecutive hi blocks of p_t·s_t elements are hstride = p_t·s_t + pad_t apart. pad_t makes
//     hstride ≡ s_t (mod 32) when s_t < 32, so the 16-byte vectors that one half-warp reads from
//     neighbouring hi blocks (runs of s_t / 4 vectors) land in different bank groups
//     (e.g. (16,16,16): s = 16, hstride 272; (8,8,8,8): s = 8, hstride 72).
//   - factor t: p_t × qpad_t, row-major, columns past q_t zero; the last factor p4 rows, zeros past p.
//
// Lane layout of a warp tile (qpad × TN·LN): LJ = qpad / TM lanes along j, LN = 32 / LJ along n; a
// thread owns j ∈ {4·jg + 4·LJ·w + u} and n ∈ {4·ln + 4·LN·v + u} (the last step, whose B vectors run
// along k: n ∈ {ln + LN·i}, see fast_step_last). Lane bit 0 is a jg bit and bit 1
// an ln bit, so lanes (i, i^1) load the same B vector and lanes (i, i^2) the same factor vector:
// the two pairings under which shared memory returns two registers per lane-clock.
//
// The host emulation runs each phase for threads 0 … 255 in turn with one register file per thread
// (FastRegs), so the CPU tests execute this program's index arithmetic, in-place writes and tile
// pipeline; cp.async is a plain copy there.

#include "kron_internal.h"
#include "kron_tile.h"

#if defined(__CUDACC__)
#include <atomic>
#include <cstddef>

#include "../common/cuda_check.h"
#endif

namespace sparsekern::kron::detail {

/// Per-thread registers that survive a barrier: the accumulator tile.
template <int TM, int TN>
struct FastRegs {
  float acc[TM][TN];
};

template <int V>
struct IntC {
  static constexpr int value = V;
  SK_KRON_HD constexpr operator int() const { return V; }
};

SK_KRON_HD constexpr int ilog2c(int v) { return v <= 1 ? 0 : 1 + ilog2c(v / 2); }

/// The lane's position along j (0 … LJ−1): bit 0 and bits 2… of the lane.
template <int LJ>
SK_KRON_FN int lane_jg(int lane) {
  if constexpr (LJ == 1) {
    return 0;
  } else {
    return (lane & 1) | (((lane >> 2) & (LJ / 2 - 1)) << 1);
  }
}

/// The lane's position along n (0 … 32/LJ − 1): bit 1 and the bits above the jg bits.
template <int LJ>
SK_KRON_FN int lane_ln(int lane) {
  if constexpr (LJ == 1) {
    return lane;
  } else {
    return ((lane >> 1) & 1) | ((lane >> (1 + ilog2c(LJ))) << 1);
  }
}

SK_KRON_FN void lds4(const float* p, float* o) {
#if defined(__CUDA_ARCH__)
  const float4 t = *reinterpret_cast<const float4*>(p);
  o[0] = t.x; o[1] = t.y; o[2] = t.z; o[3] = t.w;
#else
  o[0] = p[0]; o[1] = p[1]; o[2] = p[2]; o[3] = p[3];
#endif
}

/// A 16-byte global load (read-only path) into four registers.
SK_KRON_FN void ldg4(const float* p, float* o) {
#if defined(__CUDA_ARCH__)
  const float4 t = __ldg(reinterpret_cast<const float4*>(p));
  o[0] = t.x; o[1] = t.y; o[2] = t.z; o[3] = t.w;
#else
  o[0] = p[0]; o[1] = p[1]; o[2] = p[2]; o[3] = p[3];
#endif
}

// 16-byte stores in inline PTX: written as float4 assignments, NVVM split some of them into four
// scalar stores (seen in the SASS of this file), a quarter of the store bandwidth.
/// Shared memory.
SK_KRON_FN void sts4(float* p, float a0, float a1, float a2, float a3) {
#if defined(__CUDA_ARCH__)
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(s), "f"(a0), "f"(a1), "f"(a2), "f"(a3)
               : "memory");
#else
  p[0] = a0; p[1] = a1; p[2] = a2; p[3] = a3;
#endif
}

/// Global memory.
SK_KRON_FN void stg2(float* p, float a0, float a1) {
#if defined(__CUDA_ARCH__)
  asm volatile("st.global.v2.f32 [%0], {%1, %2};\n" ::"l"(p), "f"(a0), "f"(a1) : "memory");
#else
  p[0] = a0; p[1] = a1;
#endif
}

SK_KRON_FN void stg4(float* p, float a0, float a1, float a2, float a3) {
#if defined(__CUDA_ARCH__)
  asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "f"(a0), "f"(a1), "f"(a2), "f"(a3)
               : "memory");
#else
  p[0] = a0; p[1] = a1; p[2] = a2; p[3] = a3;
#endif
}

/// dst ← valid ? *src : 0, asynchronously on the GPU (4-byte cp.async with zero fill).
SK_KRON_FN void copy4_async(float* dst, const float* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(src), "r"(valid ? 4 : 0)
               : "memory");
#else
  *dst = valid ? *src : 0.0f;
#endif
}

/// dst ← valid ? 16 bytes at src : 0, asynchronously on the GPU (both 16-byte aligned).
SK_KRON_FN void copy16_async(float* dst, const float* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(valid ? 16 : 0)
               : "memory");
#else
  for (int i = 0; i < 4; ++i) dst[i] = valid ? src[i] : 0.0f;
#endif
}

/// Whether a factor's rows (row stride rs, column stride cs, q columns) are contiguous with every
/// 4-column group 16-byte aligned: then they can be read, or copied, 16 bytes at a time.
SK_KRON_FN bool rows_vec16(const float* f, long long rs, long long cs, int q) {
  return cs == 1 && (q & 3) == 0 && (rs & 3) == 0 && (reinterpret_cast<unsigned long long>(f) & 15) == 0;
}

/// Lets the grid launched after this one as its programmatic dependent (kron_launch.cuh: the
/// backward's reduction of the blocks' partial ∂ℓ/∂F, or the next fused kernel) start launching
/// once every block of this grid has called it or exited; that grid waits for this one's end
/// before reading. Called by the backward programs when only their partial sums are left to write,
/// and by the forward programs at the start of a block's last tile.
SK_KRON_FN void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

SK_KRON_FN void async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

/// Waits until at most N of this thread's committed copy groups are still in flight.
template <int N>
SK_KRON_FN void async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

#if defined(__CUDACC__)
/// Opts `Kernel` in to `smem` bytes of dynamic shared memory when above 48 KB, once per device and
/// size (a template on the kernel itself: one record per kernel, not per signature).
template <auto Kernel>
void fast_opt_in_smem(std::size_t smem, int device) {
  constexpr int kMaxDevices = 64;
  static std::atomic<std::size_t> configured[kMaxDevices] = {};
  if (smem > (48u << 10) && (device >= kMaxDevices || configured[device].load() < smem)) {
    SK_CUDA_TRY(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    if (device < kMaxDevices) configured[device].store(smem);
  }
}

/// The Exec of the register-tile programs on the GPU: one thread's registers across barriers live
/// in the kernel's frame (every index into them is a compile-time constant, so they stay in
/// registers); a phase ends with __syncthreads().
template <class Regs>
struct FastDeviceExec {
  Regs regs;
  __device__ __forceinline__ int nthreads() const { return static_cast<int>(blockDim.x); }
  template <class F>
  __device__ __forceinline__ void phase(F&& f) {
    f(static_cast<int>(threadIdx.x), regs);
    __syncthreads();
  }
  template <class F>
  __device__ __forceinline__ void phase_nosync(F&& f) {
    f(static_cast<int>(threadIdx.x), regs);
  }
  /// The barrier that ends a phase, on its own (after phase_nosync).
  __device__ __forceinline__ void sync() { __syncthreads(); }
};
#endif

/// Calls f(IntC<qpad>) for the factor widths the planner allows.
template <class F>
SK_KRON_FN void with_qpad(int qpad, F&& f) {
  switch (qpad) {
    case 8: f(IntC<8>{}); break;
    case 16: f(IntC<16>{}); break;
    case 32: f(IntC<32>{}); break;
    default: f(IntC<64>{}); break;
  }
}

/// with_qpad in a program specialised to one factor width: U ≠ 0 when every width the program
/// dispatches on equals U (kron_fast_bwd.h's fb_uniform_qpad), so each step compiles once instead
/// of once per width; U = 0 dispatches at run time. (The register-tile forward specialised this way
/// measured slower for U = 64: H100, 1024 × (64 ⊗ 64) 37.1-37.5 → 38.2-38.4 µs, 4096 rows 131.4-132.0
/// → 134.7-136.0, tools/diag/s19_run4.sh; ptxas gave it 168 registers instead of 216.)
template <int U, class F>
SK_KRON_FN void with_qpad_u(int qpad, F&& f) {
  if constexpr (U != 0) {
    (void)qpad;
    f(IntC<U>{});
  } else {
    with_qpad(qpad, f);
  }
}

/// Calls f(IntC<8>), f(IntC<16>) or f(IntC<32>): the smallest bound ≥ p, for the kernels
/// instantiated per largest factor width (the small-factor kernels, kron_head.h's pass; p ≤ 32).
/// Host code: the launchers and the CPU backend's block loop.
template <class F>
void with_pmax(int p, F&& f) {
  if (p <= 8)
    f(IntC<8>{});
  else if (p <= 16)
    f(IntC<16>{});
  else
    f(IntC<32>{});
}

/// A thread's place in a step: its first j, and the first n of each of its TN/4 column vectors.
template <int TM, int TN, int QP>
struct FastGeo {
  static constexpr int LJ = QP / TM;
  static constexpr int LN = 32 / LJ;
  static constexpr int WN = TN * LN;  // columns n per warp
  static_assert(LJ >= 1 && LJ <= 32 && QP % (4 * LJ) == 0, "tile does not divide the factor width");
  int j0 = 0;
  int nv[TN / 4];
  SK_KRON_FN explicit FastGeo(int tid) {
    const int lane = tid & 31, warp = tid >> 5;
    j0 = 4 * lane_jg<LJ>(lane);
    const int n0 = warp * WN + 4 * lane_ln<LJ>(lane);
    SK_KRON_UNROLL
    for (int v = 0; v < TN / 4; ++v) nv[v] = n0 + v * 4 * LN;
  }
  /// j of accumulator row jj.
  static SK_KRON_FN int jof(int j0, int jj) { return j0 + (jj >> 2) * 4 * LJ + (jj & 3); }
};

/// acc += Σ_{k < K} A[k, j-tile] ⊗ B(k, n-tile); A rows `astride` apart (a factor copy: QP), b[v]
/// points at B(0, vector v), consecutive k `bstride` apart.
template <int TM, int TN, int QP, int UNROLL = 4, int BS = 0>
SK_KRON_FN void fast_mma_acc(const float* fa, int astride, const float* const (&b)[TN / 4], int bstride, int K,
                             float (&acc)[TM][TN]) {
  constexpr int LJ = FastGeo<TM, TN, QP>::LJ;
  // BS: B's row stride where the caller knows it at compile time (then every load of an unrolled
  // trip addresses off one register with an immediate offset, instead of an address per k).
  const int bs = BS != 0 ? BS : bstride;
#if defined(__CUDACC__)
#pragma unroll UNROLL
#endif
  for (int k = 0; k < K; ++k) {
    float av[TM], bv[TN];
    SK_KRON_UNROLL
    for (int w = 0; w < TM / 4; ++w) lds4(fa + k * astride + w * 4 * LJ, av + 4 * w);
    SK_KRON_UNROLL
    for (int v = 0; v < TN / 4; ++v) lds4(b[v] + k * bs, bv + 4 * v);
    SK_KRON_UNROLL
    for (int i = 0; i < TM; ++i) {
      SK_KRON_UNROLL
      for (int j = 0; j < TN; ++j) acc[i][j] += av[i] * bv[j];
    }
  }
}

/// acc = Σ_k F[k, j-tile] ⊗ B(k, n-tile) for a factor copy F (rows `astride` apart: QP, or QP + 4
/// for the backward's padded transposed copies).
template <int TM, int TN, int QP, int UNROLL = 4, int BS = 0>
SK_KRON_FN void fast_mma(const float* fa, const float* const (&b)[TN / 4], int bstride, int K,
                         float (&acc)[TM][TN], int astride = QP) {
  SK_KRON_UNROLL
  for (int i = 0; i < TM; ++i) {
    SK_KRON_UNROLL
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
  }
  fast_mma_acc<TM, TN, QP, UNROLL, BS>(fa, astride, b, bstride, K, acc);
}

/// Starts the copies of every factor into shared memory as p × qpad (row-major, columns past q
/// zero-filled), as cp.async: plain loads followed by shared stores serialise on the GPU (the
/// compiler cannot move a load above a store through generic pointers), one global latency per
/// element a thread copies, which was a large part of a small product's kernel time. The caller
/// commits them with the first tile's copies.
SK_KRON_FN void fast_load_factors(const FastArgs& a, float* sm, int tid, int nt) {
  for (int t = 0; t < a.nf; ++t) {
    // The fields in locals: the copies' "memory" clobbers would make the compiler reload each one
    // per copy (ncu, 1024 × (64 ⊗ 64): ~40 instructions per 4-byte copy, 8% of the kernel's).
    const FastStep& st = a.st[t];
    const float* const f = static_cast<const float*>(st.f);
    const long long rs = st.f_rs, cs = st.f_cs;
    const int p = st.p, q = st.q, qpad = st.qpad, sh = ilog2c(qpad);
    float* const dst = sm + st.f_off;
    const int rows = t == a.nf - 1 ? (p + 3) & ~3 : p;  // the last step reads k in groups of 4
    // 16-byte copies where each row of the factor is contiguous and its 4-column groups are
    // 16-byte aligned (then columns q … qpad − 1, q a multiple of 4, are whole zero-filled vectors).
    if (rows_vec16(f, rs, cs, q)) {
      const int total = rows * (qpad >> 2);
      for (int e = tid; e < total; e += nt) {
        const int i = e >> (sh - 2), j = (e & ((qpad >> 2) - 1)) << 2;
        const bool valid = j < q && i < p;
        copy16_async(dst + 4 * e, valid ? f + i * rs + j : f, valid);
      }
    } else {
      const int total = rows * qpad;
      for (int e = tid; e < total; e += nt) {
        const int i = e >> sh, j = e & (qpad - 1);
        const bool valid = j < q && i < p;
        copy4_async(dst + e, valid ? f + i * rs + j * cs : f, valid);
      }
    }
  }
}

/// Starts the copy of tile `tile`'s rows of X into `xt` (natural order, see the file comment): row
/// n = (chunk c, hi) holds X[m0 + c, hi·p … hi·p + p − 1] at n·xp; rows past M are zero-filled.
/// With vec_x, 16-byte copies: consecutive threads take consecutive vectors of the tile (full
/// 32-byte sectors of X). Where the vectors of a row divide the block (p = 64: 16 per row, 8 rows
/// per pass of 128 threads) a thread keeps its vector and walks its rows with pointer increments;
/// the fields it needs are copied into locals first, since the copies' "memory" clobbers would make
/// the compiler reload every field of `a` per copy. Else one element per copy, same layout.
SK_KRON_FN void fast_issue_x(const FastArgs& a, float* xt, long long tile, int tid, int nt) {
  const FastStep& st = a.st[a.nf - 1];
  const int p = st.p, H = st.hs, xp = a.xp;
  const int n_rows = a.chunks * H;
  const long long m0 = tile * a.chunks;
  const long long mrem = a.M - m0;  // rows of X from this tile's first on
  const float* const x = a.x;
  const long long ldx = a.ldx;
  const FastDiv dh = st.div_hs;
  const FastDiv dr = a.div_xr;  // by p / 4 where vec_x (a multiply and a shift, not a division)
  if (a.vec_x && nt % (p >> 2) == 0) {
    const int pv = p >> 2, step = dr.div(nt);
    int n = dr.div(tid);
    const int kv = tid - n * pv;
    int c = dh.div(n);
    int hi = n - c * H;
    const float* src = x + m0 * ldx + static_cast<long long>(c) * ldx + static_cast<long long>(hi) * p + 4 * kv;
    float* dst = xt + n * xp + 4 * kv;
    for (; n < n_rows; n += step, dst += step * xp) {
      copy16_async(dst, c < mrem ? src : x, c < mrem);
      hi += step;
      src += step * p;
      while (hi >= H) {  // the next chunk row (once at most where step ≤ H)
        hi -= H;
        ++c;
        src += ldx - static_cast<long long>(H) * p;
      }
    }
  } else if (a.vec_x) {
    const int pv = p >> 2;
    const int total = n_rows * pv;
    for (int e = tid; e < total; e += nt) {
      const int n = dr.div(e);
      const int kv = e - n * pv;
      const int c = dh.div(n);
      const bool valid = c < mrem;
      const float* src = x + (valid ? m0 + c : 0) * ldx + static_cast<long long>(n - c * H) * p + 4 * kv;
      copy16_async(xt + n * xp + 4 * kv, src, valid);
    }
  } else {
    const int total = n_rows * p;
    for (int e = tid; e < total; e += nt) {
      const int n = dr.div(e);
      const int k = e - n * p;
      const int c = dh.div(n);
      const bool valid = c < mrem;
      const float* src = x + (valid ? m0 + c : 0) * ldx + static_cast<long long>(n - c * H) * p + k;
      copy4_async(xt + n * xp + k, src, valid);
    }
  }
}

/// Zeros columns p … p4 − 1 (p4 = p rounded up to 4) of every row of an X buffer: the last step
/// reads k in groups of four, and the copies never write these (the factor's rows there are zero,
/// but a NaN left in shared memory would still poison the sums).
SK_KRON_FN void fast_zero_x_pad(const FastArgs& a, float* xt, int tid, int nt) {
  const int p = a.st[a.nf - 1].p, gap = ((p + 3) & ~3) - p;
  if (gap == 0) return;
  const int n_rows = a.chunks * a.st[a.nf - 1].hs;
  for (int e = tid; e < n_rows * gap; e += nt) {
    const int n = e / gap;
    xt[n * a.xp + p + (e - n * gap)] = 0.0f;
  }
}

/// The last mode (first step): B(k, n) = X tile row n, element k. The thread owns rows
/// n = warp·WN + ln + LN·i, i < TN (a warp's LN lanes along n read LN consecutive rows, in different
/// bank groups at the pitch xp) and reads each as one 16-byte vector per group of four k: per four
/// k, TM/4 · 4 factor vectors (equal in lane pairs, as in the other steps) and TN row vectors, as
/// many loads per FFMA as the transposed layout's column vectors gave. Its output (c, hi, j) is
/// element hi·q + j of T_{nf−2}; with a.t0 set (two modes, a training forward keeping its state for
/// the backward) also of row tile·chunks + c of a.t0.
template <int TM, int TN, int QP>
SK_KRON_FN void fast_step_last(const FastArgs& a, long long tile, const float* xt, float* sbuf, const float* sm,
                               int tid, float (&acc)[TM][TN]) {
  using Geo = FastGeo<TM, TN, QP>;
  constexpr int LJ = Geo::LJ, LN = Geo::LN;
  const FastStep& st = a.st[a.nf - 1];
  const int lane = tid & 31;
  const int j0 = 4 * lane_jg<LJ>(lane);
  const int ln = lane_ln<LJ>(lane);
  const int nb = (tid >> 5) * Geo::WN + ln;
  const int n_rows = a.chunks * st.hs;
  const float* b[TN];
  SK_KRON_UNROLL
  for (int i = 0; i < TN; ++i) {
    const int n = nb + LN * i;
    b[i] = xt + (n < n_rows ? n : 0) * a.xp;  // rows past the tile: any finite row, results dropped
  }
  SK_KRON_UNROLL
  for (int ii = 0; ii < TM; ++ii) {
    SK_KRON_UNROLL
    for (int i = 0; i < TN; ++i) acc[ii][i] = 0.0f;
  }
  const float* const fa = sm + st.f_off + j0;
  const int groups = (st.p + 3) >> 2;
#if defined(__CUDACC__)
#pragma unroll 2
#endif
  for (int u = 0; u < groups; ++u) {
    const float* const fk = fa + (u << 2) * QP;
    float av[4][TM], bv[TN][4];
    SK_KRON_UNROLL
    for (int kk = 0; kk < 4; ++kk) {
      SK_KRON_UNROLL
      for (int w = 0; w < TM / 4; ++w) lds4(fk + kk * QP + w * 4 * LJ, av[kk] + 4 * w);
    }
    SK_KRON_UNROLL
    for (int i = 0; i < TN; ++i) lds4(b[i] + 4 * u, bv[i]);
    SK_KRON_UNROLL
    for (int kk = 0; kk < 4; ++kk) {
      SK_KRON_UNROLL
      for (int ii = 0; ii < TM; ++ii) {
        SK_KRON_UNROLL
        for (int i = 0; i < TN; ++i) acc[ii][i] += av[kk][ii] * bv[i][kk];
      }
    }
  }
  // Write back: per row n, the thread's j vectors are 4 consecutive j of one output row. The
  // fields in locals first: the stores' "memory" clobbers would reload each one per row.
  const FastDiv div_hs = st.div_hs, div_pn = st.div_pn;
  const int hs = st.hs, q = st.q, out_pad = st.out_pad, cs = a.cs;
  float* const t0 = a.t0;
  const long long ldt0 = a.ldt0, mrem = a.M - tile * a.chunks;
  float* const t0_tile = t0 != nullptr ? t0 + tile * a.chunks * ldt0 : nullptr;
  SK_KRON_UNROLL
  for (int i = 0; i < TN; ++i) {
    const int n = nb + LN * i;
    if (n >= n_rows) continue;
    const int c = div_hs.div(n);
    const int hi = n - c * hs;
    float* row = sbuf + c * cs + hi * q + div_pn.div(hi) * out_pad;
    SK_KRON_UNROLL
    for (int w = 0; w < TM / 4; ++w) {
      const int j = j0 + w * 4 * LJ;
      if (j < q) sts4(row + j, acc[4 * w][i], acc[4 * w + 1][i], acc[4 * w + 2][i], acc[4 * w + 3][i]);
    }
    if (t0_tile != nullptr && c < mrem) {
      float* trow = t0_tile + c * ldt0 + static_cast<long long>(hi) * q;
      SK_KRON_UNROLL
      for (int w = 0; w < TM / 4; ++w) {
        const int j = j0 + w * 4 * LJ;
        if (j < q) stg4(trow + j, acc[4 * w][i], acc[4 * w + 1][i], acc[4 * w + 2][i], acc[4 * w + 3][i]);
      }
    }
  }
}

/// The column vectors of inner step t: B(0, n) for each of the thread's vectors (the chunk buffer's
/// start for vectors past the tile, whose results are dropped).
template <int TM, int TN, int QP>
SK_KRON_FN void fast_inner_operands(const FastArgs& a, const FastStep& st, const float* sbuf,
                                    const FastGeo<TM, TN, QP>& g, const float* (&b)[TN / 4]) {
  const int n_cols = a.chunks * st.hs;
  SK_KRON_UNROLL
  for (int v = 0; v < TN / 4; ++v) {
    const int n = g.nv[v];
    if (n < n_cols) {
      const int c = st.div_hs.div(n);
      const int r = n - c * st.hs;
      const int hi = st.div_s.div(r);
      b[v] = sbuf + c * a.cs + hi * st.hstride + (r - hi * st.s);
    } else {
      b[v] = sbuf;
    }
  }
}

/// Inner step t (0 < t < nf−1): compute, then (after the caller's barrier) fast_write_inner.
template <int TM, int TN, int QP>
SK_KRON_FN void fast_step_inner(const FastArgs& a, int t, const float* sbuf, const float* sm, int tid,
                                float (&acc)[TM][TN]) {
  const FastStep& st = a.st[t];
  const FastGeo<TM, TN, QP> g(tid);
  const float* b[TN / 4];
  fast_inner_operands<TM, TN, QP>(a, st, sbuf, g, b);
  fast_mma<TM, TN, QP>(sm + st.f_off + g.j0, b, st.s, st.p, acc);
}

/// Writes inner step t's tile as element hi·(q·s) + j·s + lo of T_{t−1} (plus its padding).
template <int TM, int TN, int QP>
SK_KRON_FN void fast_write_inner(const FastArgs& a, int t, float* sbuf, int tid, const float (&acc)[TM][TN]) {
  using Geo = FastGeo<TM, TN, QP>;
  const FastStep& st = a.st[t];
  const Geo g(tid);
  // The fields in locals (the stores' "memory" clobbers would reload them per store).
  const int hs = st.hs, q = st.q, s = st.s, out_pad = st.out_pad, cs = a.cs;
  const FastDiv div_hs = st.div_hs, div_s = st.div_s, div_pn = st.div_pn;
  const int n_cols = a.chunks * hs;
  SK_KRON_UNROLL
  for (int v = 0; v < TN / 4; ++v) {
    const int n = g.nv[v];
    if (n >= n_cols) continue;
    const int c = div_hs.div(n);
    const int r = n - c * hs;
    const int hi = div_s.div(r);
    float* base = sbuf + c * cs + hi * (q * s) + div_pn.div(hi) * out_pad + (r - hi * s);
    SK_KRON_UNROLL
    for (int jj = 0; jj < TM; ++jj) {
      const int j = Geo::jof(g.j0, jj);
      if (j < q) sts4(base + j * s, acc[jj][4 * v], acc[jj][4 * v + 1], acc[jj][4 * v + 2], acc[jj][4 * v + 3]);
    }
  }
}

/// The first mode (final step): compute and store Y[m, j·s + lo] straight from the registers.
template <int TM, int TN, int QP>
SK_KRON_FN void fast_step_final(const FastArgs& a, long long tile, const float* sbuf, const float* sm,
                                int tid, float (&acc)[TM][TN]) {
  using Geo = FastGeo<TM, TN, QP>;
  const FastStep& st = a.st[0];  // H = 1: n = (c, lo), hs = s
  const Geo g(tid);
  const float* b[TN / 4];
  fast_inner_operands<TM, TN, QP>(a, st, sbuf, g, b);
  fast_mma<TM, TN, QP>(sm + st.f_off + g.j0, b, st.s, st.p, acc);
  // The fields in locals (the stores' "memory" clobbers would reload them per store).
  const int hs = st.hs, q = st.q, s = st.s;
  const FastDiv div_hs = st.div_hs;
  const int n_cols = a.chunks * hs;
  const long long ldy = a.ldy, mrem = a.M - tile * a.chunks;
  float* const y_tile = a.y + tile * a.chunks * ldy;
  const bool vec_y = a.vec_y != 0;
  SK_KRON_UNROLL
  for (int v = 0; v < TN / 4; ++v) {
    const int n = g.nv[v];
    if (n >= n_cols) continue;
    const int c = div_hs.div(n);
    if (c >= mrem) continue;
    float* row = y_tile + c * ldy + (n - c * hs);
    SK_KRON_UNROLL
    for (int jj = 0; jj < TM; ++jj) {
      const int j = Geo::jof(g.j0, jj);
      if (j >= q) continue;
      float* o = row + static_cast<long long>(j) * s;
      if (vec_y) {
        stg4(o, acc[jj][4 * v], acc[jj][4 * v + 1], acc[jj][4 * v + 2], acc[jj][4 * v + 3]);
      } else {
        o[0] = acc[jj][4 * v];
        o[1] = acc[jj][4 * v + 1];
        o[2] = acc[jj][4 * v + 2];
        o[3] = acc[jj][4 * v + 3];
      }
    }
  }
}

/// The block program. `Exec` provides nthreads(), phase(f) (f(tid, regs) on every thread, then a
/// barrier) and phase_nosync(f) (no barrier after); regs is the thread's FastRegs<TM, TN>.
template <int TM, int TN, class Exec>
SK_KRON_PROGRAM void fast_forward_program(const FastArgs& a, Exec& ex, float* sm, long long block,
                                          long long grid) {
  using Regs = FastRegs<TM, TN>;
  const int nt = ex.nthreads();
  const int nf = a.nf;
  float* const x0 = sm + a.off_x0;
  float* const x1 = sm + a.off_x1;
  float* const sbuf = sm + a.off_s;
  const bool two = a.nstage == 2;
  // The factors, and the first tile's X (in flight while the factors load).
  ex.phase([&](int tid, Regs&) {
    fast_zero_x_pad(a, x0, tid, nt);
    if (two) fast_zero_x_pad(a, x1, tid, nt);
    if (block < a.ntiles) fast_issue_x(a, x0, block, tid, nt);
    fast_load_factors(a, sm, tid, nt);
    async_commit();
  });
  long long i = 0;
  for (long long tile = block; tile < a.ntiles; tile += grid, ++i) {
    const long long next = tile + grid;
    float* const xcur = two && (i & 1) ? x1 : x0;
    float* const xnext = two && !(i & 1) ? x1 : x0;
    // X of this tile in shared memory; with two stages, the next tile's copy starts first (its
    // buffer was last read by the previous tile's first step, before that step's barrier).
    ex.phase([&](int tid, Regs&) {
      if (next >= a.ntiles) pdl_launch_dependents();  // the block's last tile (see kron_launch.cuh)
      if (two) {
        if (next < a.ntiles) fast_issue_x(a, xnext, next, tid, nt);
        async_commit();
        async_wait<1>();
      } else {
        async_wait<0>();
      }
    });
    // The last mode: X → registers → T_{nf−2} in the state buffer (nobody reads that buffer now:
    // the previous tile's final step finished before the barrier above).
    ex.phase([&](int tid, Regs& r) {
      with_qpad(a.st[nf - 1].qpad,
                [&](auto qp) { fast_step_last<TM, TN, decltype(qp)::value>(a, tile, xcur, sbuf, sm, tid, r.acc); });
    });
    // With one stage, X is free from here on: the next tile's copy runs during the steps below.
    bool pending = !two && next < a.ntiles;
    for (int t = nf - 2; t >= 1; --t) {
      const bool issue = pending;
      ex.phase([&](int tid, Regs& r) {
        if (issue) {
          fast_issue_x(a, x0, next, tid, nt);
          async_commit();
        }
        with_qpad(a.st[t].qpad,
                  [&](auto qp) { fast_step_inner<TM, TN, decltype(qp)::value>(a, t, sbuf, sm, tid, r.acc); });
      });
      ex.phase([&](int tid, Regs& r) {
        with_qpad(a.st[t].qpad,
                  [&](auto qp) { fast_write_inner<TM, TN, decltype(qp)::value>(a, t, sbuf, tid, r.acc); });
      });
      pending = false;
    }
    const bool issue = pending;
    ex.phase_nosync([&](int tid, Regs& r) {
      if (issue) {
        fast_issue_x(a, x0, next, tid, nt);
        async_commit();
      }
      with_qpad(a.st[0].qpad,
                [&](auto qp) { fast_step_final<TM, TN, decltype(qp)::value>(a, tile, sbuf, sm, tid, r.acc); });
    });
  }
}

}  // namespace sparsekern::kron::detail
