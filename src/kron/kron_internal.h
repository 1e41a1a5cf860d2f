#pragma once
// Internals of the Kronecker family shared by the dispatch (planning), the CPU backend and the CUDA
// backend: kernel argument structs, the execution plan and the backend interface. Plain C++ that
// nvcc and the host compiler both read; no CUDA types.

#include <sparsekern/kron.h>

#include <cstdint>
#include <string>
#include <vector>

#if defined(__CUDACC__)
#define SK_KRON_HD __host__ __device__ __forceinline__
#else
#define SK_KRON_HD inline
#endif

namespace sparsekern::kron::detail {

/// Threads per block of the fused kernels: 8 warps, enough to cover a chunk tile's rows with
/// register tiles while leaving room for two or three resident blocks per SM.
constexpr int kThreads = 256;
/// Most modes one fused kernel handles (bounds the size of the kernel argument struct).
constexpr int kMaxFused = 12;
/// Factors with p or q above this run through cuBLAS one mode at a time: a 128×128 fp32 factor
/// alone would take 64 KB of the ~110 KB shared-memory budget of a block, leaving too few chunks
/// for the register tiles, while cuBLAS GEMMs are efficient at that size.
constexpr int kMaxFusedDim = 64;

SK_KRON_HD std::uint32_t umulhi32(std::uint32_t a, std::uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __umulhi(a, b);
#else
  return static_cast<std::uint32_t>((static_cast<std::uint64_t>(a) * b) >> 32);
#endif
}

/// Division of non-negative 31-bit integers by a divisor fixed on the host, by a multiply-high and
/// a shift (Granlund–Montgomery): with l = ⌈log2 d⌉ and m = ⌈2^(31+l) / d⌉, n / d = (n·m) >> (31+l)
/// for n < 2^31 (the error n·(m·d − 2^(31+l)) / (d·2^(31+l)) stays below 1/d). Index arithmetic
/// in the kernels divides by run-time chunk sizes in inner loops, where a hardware-free integer
/// division would cost ~20 instructions.
struct FastDiv {
  std::uint32_t divisor = 1;
  std::uint32_t multiplier = 0;
  int shift = 0;

  FastDiv() = default;
  explicit FastDiv(std::int64_t d) : divisor(static_cast<std::uint32_t>(d)) {
    if (d <= 1) return;
    int l = 0;
    while ((std::uint64_t(1) << l) < static_cast<std::uint64_t>(d)) ++l;
    multiplier = static_cast<std::uint32_t>(((std::uint64_t(1) << (31 + l)) + divisor - 1) / divisor);
    shift = l - 1;
  }
  SK_KRON_HD int div(int n) const {
    return divisor == 1 ? n
                        : static_cast<int>(umulhi32(static_cast<std::uint32_t>(n), multiplier) >> shift);
  }
};

/// Shared-memory index of element e of a chunk: one padding slot every 2^sh elements, so that the
/// 32 lanes of a warp reading rows r..r+31 of a (rows × p) chunk at stride p hit 32 different
/// banks: sh = 5 makes p ∈ {8, 16, 32} conflict-free (row stride p·33/32), sh = 6 makes p = 64
/// conflict-free (stride 65; with sh = 5 it would be 66, a 2-way conflict).
SK_KRON_HD int swz(int e, int sh) { return e + (e >> sh); }

/// One mode (factor) of a fused group, as the kernels see it.
struct FusedMode {
  const void* f = nullptr;  ///< the factor in global memory
  long long f_rs = 0, f_cs = 0;  ///< its row / column strides (elements)
  int p = 0, q = 0;
  int ppad = 0, qpad = 0;   ///< rows / cols of its shared-memory copy (zero-padded to the tile width)
  int f_off = 0;            ///< offset of that copy in shared memory (accumulator elements)
  int lc = 0;               ///< rows of this mode's step: the chunk is (lc, p) before it, (q, lc) after
  FastDiv div_lc;
  int part_off = 0;         ///< offset of its p×q block in a block's gradient partial sums
};

/// Arguments of one fused group (modes first … first+nf−1 of the product). The group maps its input
/// state X (M, L, s_in) — L outer index, s_in = Π p of its modes — to its output Y (M, s_out, L):
/// each (m, l) is a *chunk*: s_in contiguous elements of X in, s_out elements of Y (stride L) out.
/// A tile is tm rows × tl consecutive outer indices: tm·tl chunks in shared memory at once.
struct FusedArgs {
  const void* x = nullptr;  long long ldx = 0;   ///< X[m, l, s] at x[m·ldx + l·s_in + s]
  void* y = nullptr;        long long ldy = 0;   ///< forward: Y[m, j, l] at y[m·ldy + j·L + l]
  const void* g = nullptr;  long long ldg = 0;   ///< backward: ∂ℓ/∂Y, laid out like Y
  void* gx = nullptr;       long long ldgx = 0;  ///< backward: ∂ℓ/∂X, like X (nullptr: not wanted)
  void* partial = nullptr;  ///< backward: per-block ∂ℓ/∂F partial sums (accumulator type)
  int part_stride = 0;      ///< accumulator elements per block in `partial` (Σ p·q of the group)
  long long M = 0, L = 0;
  int nf = 0;
  FusedMode mode[kMaxFused];
  int s_in = 0, s_out = 0;
  int csp = 0;              ///< shared-memory stride of one chunk (≥ swz(largest state) + 1, odd)
  int sh = 5;               ///< padding period 2^sh of the chunks in shared memory (see swz)
  FastDiv div_s_in, div_tl;
  int tm = 1, tl = 1;
  long long tiles_l = 0, ntiles = 0;
  int vec_x = 0, vec_y = 0, vec_g = 0, vec_gx = 0;  ///< 16-byte vector access allowed (aligned)
  int off_buf = 0;          ///< shared-memory offset of the chunk buffers
  int off_scratch = 0;      ///< backward: shared-memory offset of the gradient scratch
};

/// One step (one mode t of the group, applied in the order t = nf−1 … 0) of the register-tile fused
/// forward (kron_fast.h). Before step t a chunk is the tensor (p_0 … p_t, q_{t+1} … q_{nf−1}) in
/// natural order, viewed as (hi, k, lo): hi < H = Π_{u<t} p_u, k < p_t, lo < s = Π_{u>t} q_u. The
/// step is one GEMM per tile: Out(j, n) = Σ_k F_t[k, j] · B(k, n) over the tile's n = (chunk, hi, lo).
struct FastStep {
  const void* f = nullptr;       ///< the factor in global memory, F[i, j] at f[i·f_rs + j·f_cs]
  long long f_rs = 0, f_cs = 0;
  int p = 0, q = 0;
  int qpad = 8;                  ///< columns of its shared copy: 8, 16, 32 or 64 (zero-padded)
  int f_off = 0;                 ///< offset of that copy (floats)
  int s = 1;                     ///< lo run length (1 for the last step, whose input is X)
  int hs = 0;                    ///< H·s: columns n per chunk
  FastDiv div_hs, div_s;
  int hstride = 0;               ///< inner steps: offset between consecutive hi in the chunk buffer
  int out_pad = 0;               ///< t ≥ 1: padding slots per p_{t−1} hi of the output (see kron_fast.h)
  FastDiv div_pn;                ///< t ≥ 1: division by p_{t−1}
};

/// Arguments of the register-tile fused forward of a group that spans every mode (L = 1), fp32.
struct FastArgs {
  const float* x = nullptr; long long ldx = 0;
  float* y = nullptr;       long long ldy = 0;
  long long M = 0;
  int nf = 0;
  FastStep st[kMaxFused];
  int chunks = 1;           ///< rows of X per tile
  long long ntiles = 0;
  int xp = 0;               ///< row pitch of the X tile in shared memory (see kron_fast.h)
  int vec_x = 0;            ///< 16-byte copies of X allowed (aligned rows, p of the last mode a multiple of 4)
  FastDiv div_xr;           ///< division by the vectors (vec_x) or elements of one row of the X tile
  int cs = 0;               ///< chunk stride of the state buffer
  int off_x0 = 0, off_x1 = 0, off_s = 0;  ///< shared-memory offsets (floats)
  int nstage = 1;           ///< X tiles in flight: 2 = the next tile loads during this one
  int vec_y = 0;            ///< 16-byte vector stores of Y allowed
  float* t0 = nullptr;      ///< two modes: where the first step's output (X·F1 per row) is kept, or null
  long long ldt0 = 0;       ///< its row stride (a multiple of 4, 16-byte aligned base)
};

/// One mode of the fiber-per-thread forward for small square factors (kron_small.h).
struct SmallMode {
  const float* f = nullptr;      ///< the factor in global memory, F[i, j] at f[i·f_rs + j·f_cs]
  long long f_rs = 0, f_cs = 0;
  int p = 0;                     ///< p = q ∈ {4, 8, 16, 32}
  int ls = 0;                    ///< log2 of the mode's stride s = Π_{u>t} p_u
  int f_off = 0;                 ///< offset of its transposed copy in shared memory (floats)
};

/// Arguments of the fiber-per-thread fused forward (kron_small.h): fp32, one group over every mode.
struct SmallArgs {
  const float* x = nullptr; long long ldx = 0;
  float* y = nullptr;       long long ldy = 0;
  long long M = 0;
  int nf = 0;
  SmallMode md[kMaxFused];
  int ln = 0;                    ///< log2 N, N = Π p (a row of X and of Y)
  int rows = 1;                  ///< rows of X per tile (threads · 32 / N)
  int pmax = 32;                 ///< the largest p (8, 16 or 32: which kernel instantiation runs)
  long long ntiles = 0;
  int off_x0 = 0, off_x1 = 0;    ///< the two tile buffers (floats, 16-byte aligned)
  int vec_x = 0;                 ///< 16-byte copies of X allowed (aligned base, ldx a multiple of 4)
  int vec_y = 0;                 ///< 16-byte stores of Y allowed (aligned base, ldy a multiple of 4)
  float* t0 = nullptr;           ///< two modes: where X·F1 per row is kept (as FastArgs::t0), or null
  long long ldt0 = 0;
};

/// Arguments of the fiber-per-thread fused backward for small square factors (kron_small_bwd.h):
/// fp32, one group over every mode, the forward's scope (small_eligible).
struct SmallBwdArgs {
  /// Modes, tile shape and X as for the forward (f_off: the transposed factor copies); y, ldy and
  /// vec_y describe ∂ℓ/∂X (y null: not wanted).
  SmallArgs a;
  const float* g = nullptr;  long long ldg = 0;  ///< ∂ℓ/∂Y
  int vec_g = 0;                                 ///< 16-byte copies of ∂ℓ/∂Y allowed
  float* partial = nullptr;                      ///< block b: ∂ℓ/∂F_t (p × p, row-major) at b·part_stride + part_off[t]
  long long part_stride = 0;
  int part_off[kMaxFused] = {};
  int want_f = 0;                                ///< bit t: ∂ℓ/∂F_t wanted
  int f2_off[kMaxFused] = {};                    ///< the factors' plain (untransposed) copies (floats)
  /// The pool of tile buffers (floats, 16-byte aligned): nf + 1 (nf + 2 for two modes), whose roles
  /// (X, ∂ℓ/∂Y, the states) rotate from tile to tile (see kron_small_bwd.h); nf when lean.
  int off_buf[8] = {};
  /// Lean pool (nf ≥ 3): X is not kept in shared memory; the first recompute pass runs in place on
  /// it and mode 0's contraction reads X again from global memory (one tile buffer less).
  int lean = 0;
};

/// Arguments of the natural split's mode-0 pass (kron_head.h): out[m, j, l] = Σ_i A[i, j]·in[m, i, l].
struct HeadArgs {
  const float* x = nullptr; long long ldx = 0;   ///< in: M rows of p × L (row m at x + m·ldx)
  float* y = nullptr;       long long ldy = 0;   ///< out: M rows of q × L
  long long M = 0, L = 0;                        ///< L a multiple of 4
  int p = 0, q = 0;                              ///< ≤ kHeadMaxP (32)
  const float* a = nullptr; long long a_rs = 0, a_cs = 0;  ///< A[i, j] at a[i·a_rs + j·a_cs]
  int vec = 0;                                   ///< 16-byte loads and stores allowed
};

/// Arguments of the natural split head's ∂ℓ/∂F pass (kron_head_f32.cu): block b writes
/// partial[b·p·q + i·q + j] = Σ over rows m ≡ b (mod grid), Σ_l X_m[i, l] · G_m[j, l], fp32.
struct HeadGradArgs {
  const float* x = nullptr; long long ldx = 0;   ///< X_m: p × L at x + m·ldx (16-byte aligned rows)
  const float* g = nullptr; long long ldg = 0;   ///< G_m: q × L at g + m·ldg (16-byte aligned rows)
  long long M = 0;
  int L = 0;                                     ///< a multiple of 4
  int p = 0, q = 0;                              ///< powers of two from 4 to 64
  int lc = 1;                                    ///< chunks of a row's L / 4 column vectors (work items M · lc)
  float* partial = nullptr;                      ///< grid × p·q floats
};

/// Most blocks (partial sums) of the head's ∂ℓ/∂F pass; backward plans with a natural split size
/// their partial workspace for that many.
constexpr long long kHeadGradBlocks = 1024;
/// Largest p·q of a head the 4 × 4-block pass takes.
constexpr long long kHeadGradMaxPQ = 256;
/// Heads whose ∂ℓ/∂F takes the staged 8 × 8-block pass (kron_head_f32.cu): p and q 16 or 32.
constexpr bool head_grad_wide(long long p, long long q) { return (p == 16 || p == 32) && (q == 16 || q == 32); }
/// That pass's blocks: threads, resident blocks per SM (its launch bounds; the host sizes its
/// persistent grid with it), and the columns of a work item: 4 per slice of the columns, one slice
/// per thread of each 8 × 8 block of ∂ℓ/∂F (32 for 32 × 32, 128 for 16 × 16).
constexpr int kHeadGradWideThreads = 128;
constexpr int kHeadGradWideBlocksPerSM = 3;
constexpr int head_grad_wide_cols(int p, int q) { return 4 * (kHeadGradWideThreads / (p * q / 64)); }
constexpr bool head_grad_pow2(long long v) { return v >= 4 && v <= 64 && (v & (v - 1)) == 0; }
/// Whether the head's ∂ℓ/∂F runs as one of kron_head_f32.cu's passes: the 4 × 4-block pass for p
/// and q powers of two from 4 to 64 with p·q ≤ kHeadGradMaxPQ, or the wide pass above (other heads
/// stay on cuBLAS's strided-batched GEMMs).
constexpr bool head_grad_pass_pq(long long p, long long q) {
  return (head_grad_pow2(p) && head_grad_pow2(q) && p * q <= kHeadGradMaxPQ) || head_grad_wide(p, q);
}

/// How the warps of a ∂ℓ/∂F product split: 4 × 4 tiles over (j < QP, n < np); `nwn` warps cover n,
/// the others repeat that over disjoint ranges of k (splits of them).
struct FbSplit {
  int nwn = 1, splits = 1;
};
inline FbSplit fb_split(int qp, int np, int nwarps) {
  const int wn = 4 * (32 / (qp / 4));  // columns n per warp
  FbSplit s;
  s.nwn = (np + wn - 1) / wn;
  s.splits = nwarps / s.nwn;
  return s;
}

/// The split of a ∂ℓ/∂F product (fb_split and the k per split), planned on the host into
/// FastBwdArgs::grad: made per tile it cost four run-time integer divisions (~100 instructions a
/// thread; ncu of the kept backward at 1024 × (64 ⊗ 64), s36_run3.sh), and made once per block
/// (a 64-bit division for the FastDiv) it slowed blocks of one or two tiles (s36_run4.sh).
struct FbGradPlan {
  FbSplit sp;
  FastDiv div_nwn;
  int kc = 0;  ///< k per split (a multiple of 4 for fb_grad_swz)
};
inline FbGradPlan fb_grad_plan(int qp, int np, int K, int nwarps, bool by4) {
  FbGradPlan g;
  g.sp = fb_split(qp, np, nwarps);
  g.div_nwn = FastDiv(g.sp.nwn);
  const int kc = g.sp.splits > 0 ? (K + g.sp.splits - 1) / g.sp.splits : 0;
  g.kc = by4 ? (kc + 3) & ~3 : kc;
  return g;
}

/// Arguments of the two-factor register-tile backward (layouts: kron_fast_bwd.h).
struct FastBwdArgs {
  const float* x = nullptr;  long long ldx = 0;
  const float* g = nullptr;  long long ldg = 0;
  float* gx = nullptr;       long long ldgx = 0;  ///< null: ∂ℓ/∂X not wanted
  float* partial = nullptr;                        ///< block b: ∂ℓ/∂F0 [p0][q0] then ∂ℓ/∂F1 [p1][q1]
  long long part_stride = 0;
  long long M = 0;
  const void* f0 = nullptr; long long f0_rs = 0, f0_cs = 0;
  const void* f1 = nullptr; long long f1_rs = 0, f1_cs = 0;
  int p0 = 0, q0 = 0, p1 = 0, q1 = 0;
  int p0p = 8, q0p = 8, p1p = 8, q1p = 8;  ///< widths rounded up to 8, 16, 32 or 64
  int chunks = 1;                           ///< rows of X per tile
  long long ntiles = 0;
  int nstage = 1;
  int rb = 0, dtp = 0, ttp = 0, gnp = 0;
  int off_f1 = 0, off_f0t = 0, off_f1t = 0;
  int off_in[2] = {0, 0};                   ///< stage s: XT, XN, DN, DT from here on
  int in_xn = 0, in_dn = 0, in_dt = 0;      ///< offsets within a stage
  int off_t0t = 0, off_gn = 0, off_gt = 0;
  int off_scratch = 0;                      ///< end of the block: split sums of ∂ℓ/∂F
  FastDiv div_p0, div_q0, div_q1;
  int vec_x = 0, vec_g = 0, vec_gx = 0;
  /// The forward's kept state T0 = X·F1 (rows of p0·q1, row stride ldt0), or null: recomputed. When
  /// set, T0T is a stage buffer (at in_t0t) loaded from it, and there is no XT and no F1 copy.
  const float* t0 = nullptr;
  long long ldt0 = 0;
  int in_t0t = 0;
  int alias = 0;  ///< T0 kept: GN and GT overwrite DN and DT (two stages) or T0T and DT (one), after a barrier
  /// GN's 16-byte vectors swizzled (vector v of row r at v ^ ((r >> 2) & 7); q1p ≥ 32, pitch q1p): the
  /// G1 step writes rows 4 apart from neighbouring lanes, all in one bank group unswizzled.
  int gn_swz = 0;
  FbGradPlan grad[2];  ///< the ∂ℓ/∂F0 and ∂ℓ/∂F1 products' splits (fast_bwd_layout)
};

/// C[b] = A[b] · B[b] for b < batch: A m×k, B k×n, C m×n row-major (unit column stride). A and B
/// have the operands' dtype; C has it too, or the accumulator type when `c_acc`.
struct GemmDesc {
  long long batch = 1, m = 0, n = 0, k = 0;
  const void* a = nullptr; long long a_rs = 0, a_cs = 0, a_bs = 0;
  const void* b = nullptr; long long b_rs = 0, b_cs = 0, b_bs = 0;
  void* c = nullptr;       long long c_rs = 0, c_bs = 0;
  bool c_acc = false;
};

/// A factor's gradient in one piece (Backend::factor_grad): out[i, j] = Σ_m Σ_l X_m[l, i] · G_m[j, l],
/// X_m (L × p, row-major) at x + m·ldx, G_m (q × L, row-major) at g + m·ldg, out with strides
/// (out_rs, out_cs), all of the operands' dtype.
struct FactorGradArgs {
  const void* x = nullptr; long long ldx = 0;
  const void* g = nullptr; long long ldg = 0;
  long long M = 0, L = 0;
  int p = 0, q = 0;
  void* out = nullptr; long long out_rs = 0, out_cs = 0;
};

/// out[i, j] = (acc_in ? acc_in[i·q + j] : 0) + Σ_{b < count} partial[b·stride + i·q + j] for a p×q
/// block; written to `acc_out` (accumulator type, row-major) when set, else converted to the
/// operands' dtype into `out` with strides (out_rs, out_cs). count = 0 writes zeros.
struct ReduceDesc {
  const void* partial = nullptr;
  long long count = 0, stride = 0;
  int p = 0, q = 0;
  const void* acc_in = nullptr;
  void* acc_out = nullptr;
  void* out = nullptr;
  long long out_rs = 0, out_cs = 0;
};

/// Independent reductions run by one launch: the ∂ℓ/∂F of every wanted mode of a fused group (one
/// launch instead of one per factor: on a slow host each launch costs several µs, as much as the
/// reductions themselves for small factors).
struct ReduceBatch {
  int n = 0;
  ReduceDesc d[kMaxFused];
};

/// What the planner needs to know about the device.
struct Limits {
  std::size_t smem_budget = 0;  ///< dynamic shared memory one fused block may use
  std::size_t smem_per_sm = 0;
  int num_sms = 1;
  std::size_t smem_block_max = 0;  ///< the most one block may opt in to (one block per SM)
  /// Compute capability 9.0 or newer: the fp32 fused forwards and the backward's ∂ℓ/∂F reduction
  /// may launch as programmatic dependents of the kernel before them (kron_launch.cuh, kron_pdl).
  bool dependent_launch = false;
  /// The CPU's own plan: every mode one GEMM step (the fastest on a CPU) instead of the fused GPU
  /// programs' emulation (SPARSEKERN_KRON_CPU=emulate; the tests use it to check those programs).
  bool gemm_steps = false;
};

enum class SegKind { fused, gemm };

/// One kernel of the plan: a fused group of modes, or one mode through cuBLAS.
struct Segment {
  SegKind kind = SegKind::fused;
  int first = 0, count = 0;       ///< modes [first, first + count)
  long long L = 1;                ///< outer index: Π q of the modes after, Π p of the modes before
  long long s_in = 1, s_out = 1, s_max = 1;
  // fused only
  int rn = 8;                     ///< register-tile width (columns per thread)
  int tm = 1, tl = 1, csp = 0, nbuf = 2, sh = 5;
  int off_buf = 0, off_scratch = 0, part_stride = 0;
  std::size_t smem = 0;
  long long tiles_l = 0, ntiles = 0, grid = 0;
  // gemm only (backward): batch rows per cuBLAS call of the ∂ℓ/∂F partial products
  long long gemm_chunk = 0;
  // fused forward through the register-tile kernel (kron_fast.h) instead of kron_tile.h's program
  bool fast = false;
  int fast_tile = 8;              ///< register tile fast_tile × fast_tile (8 or 4)
  int fast_chunks = 1;            ///< rows of X per tile
  int fast_nstage = 1;            ///< X tiles in shared memory (2: the next tile loads during this one)
  int fast_threads = 256;         ///< threads per block (256, or 128 for 8 × 8 tiles)
  // register-tile backward (two modes): rows per tile, stages, shared memory, grid when the
  // forward's state T0 is kept (the fast_* fields above are for its recompute)
  int kept_tile = 4, kept_chunks = 1, kept_nstage = 1;
  std::size_t kept_smem = 0;
  long long kept_ntiles = 0, kept_grid = 0;
  // fused forward through the fiber-per-thread kernel for small square factors (kron_small.h)
  bool small = false;
  int small_threads = 256;        ///< threads per block (256, or 128 when 256 leaves SMs idle)
  int small_rows = 1;             ///< rows of X per tile (threads · 32 / N)
  // fused backward through the fiber-per-thread kernel (kron_small_bwd.h); small_threads and
  // small_rows as above, smem / ntiles / grid the backward's own
  bool small_bwd = false;
  int small_nbuf = 0;             ///< tile buffers of the backward's pool
  bool small_lean = false;        ///< the lean pool (SmallBwdArgs::lean)
  // Natural order (forward only, see make_plan's tail split): the segment keeps the modes in
  // place instead of rotating them. The fused tail (modes 1 … n−1, run by the small-factor or the
  // register-tile kernel) reads its input (M, L, s_in) as M·L rows of s_in and writes (M, L, s_out);
  // the GEMM head (mode 0) then reads (M, p, L) and writes (M, q, L), Y's own layout.
  bool natural = false;
  // The natural split's head (mode 0) through kron_head.h's pass instead of cuBLAS (by default
  // for p, q ≤ 8; SPARSEKERN_KRON_HEAD=kernel up to 32, =gemm never: kron_plan.cpp).
  bool head_pass = false;
};

/// Shared-memory layout of the register-tile forward for a group of modes (see kron_fast.h).
struct FastLayout {
  int nf = 0;
  int qpad[kMaxFused] = {};
  int s[kMaxFused] = {};         ///< lo run length of step t (1 for the last)
  int hs[kMaxFused] = {};        ///< columns n per chunk of step t
  int hstride[kMaxFused] = {};   ///< inner steps: hi stride in the state buffer
  int pad[kMaxFused] = {};       ///< padding per hi block of the state before step t
  int f_off[kMaxFused] = {};
  long long out_per_chunk = 0;   ///< most outputs (with padded q) one chunk produces in a step
  int xp = 0;                    ///< the X tile's row pitch (FastArgs)
  int cs = 0;
  int off_x0 = 0, off_x1 = 0, off_s = 0;
  std::size_t smem = 0;          ///< bytes
};


/// The kernels of a forward (or of the recompute + backward) in execution order, and where their
/// intermediate states live in the workspace.
struct Plan {
  bool backward = false;
  long long M = 0;
  std::vector<Segment> segs;            ///< segs[0] holds the last mode (it runs first)
  std::vector<long long> state;         ///< state[s]: row length of the input of segs[s]; state[NS] = Q
  // Workspace layout (byte offsets; all 256-byte aligned).
  std::size_t ws_bytes = 0;
  std::size_t off_ping = 0, off_pong = 0;        ///< forward: alternate intermediate states
  std::vector<std::size_t> off_saved;            ///< backward: saved input state of segs[s] (s ≥ 1)
  std::size_t off_grad[2] = {0, 0};              ///< backward: alternate state gradients
  std::size_t off_partial = 0, off_acc = 0;      ///< backward: ∂ℓ/∂F partial sums, accumulator
};

struct ModeDims {
  long long p = 1, q = 1;
};

/// Whether the fiber-per-thread forward (kron_small.h) takes these modes: square factors, every
/// p ∈ {4, 8, 16, 32}, 1024 ≤ Π p ≤ 8192 (fp32 and one group over every mode checked by the caller).
bool small_eligible(const std::vector<ModeDims>& modes);

/// The layout for `chunks` rows per tile and `nstage` X buffers (chunks = 0: sizes per chunk only).
FastLayout fast_layout(const std::vector<ModeDims>& modes, int chunks, int nstage);

/// The layout of the two-factor register-tile backward (kron_fast_bwd.h) for `chunks` rows per tile:
/// fills a's sizes, pitches and shared-memory offsets; returns its shared memory in bytes.
/// `kept`: the layout for a kept forward state T0 (see FastBwdArgs::t0).
std::size_t fast_bwd_layout(const std::vector<ModeDims>& modes, int chunks, int nstage, bool kept,
                            FastBwdArgs& a);


/// Plans the kernels for M rows and these factor shapes on a device with `lim`.
/// `backward` plans the recompute + backward (fused groups then hold more buffers). `x_dense`: the
/// forward's X rows are Π p elements apart (allows the natural-order tail split, which views X as
/// M · p₀ rows).
Plan make_plan(long long M, const std::vector<ModeDims>& modes, DType dtype, const Limits& lim,
               bool backward, bool x_dense = false);

/// Executes plan steps on one device type. The dispatch (kron_matmul.cpp) orchestrates the steps;
/// backends only run them.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual Limits limits(Device device) = 0;
  virtual void fused_forward(DType dtype, int rn, const FusedArgs& a, long long grid, std::size_t smem,
                             Device device, Stream stream) = 0;
  virtual void fused_backward(DType dtype, int rn, const FusedArgs& a, long long grid, std::size_t smem,
                              Device device, Stream stream) = 0;
  /// The register-tile fp32 forward (kron_fast.h): tile × tile register tiles (8 or 4), `threads`
  /// per block (256, or 128 with 8 × 8 tiles).
  virtual void fused_forward_fast(int tile, int threads, const FastArgs& a, long long grid, std::size_t smem,
                                  Device device, Stream stream) = 0;
  /// The fiber-per-thread fp32 forward for small square factors (kron_small.h), `threads` per block.
  virtual void fused_forward_small(int threads, const SmallArgs& a, long long grid, std::size_t smem, Device device,
                                   Stream stream) = 0;
  /// The fiber-per-thread fp32 backward for small square factors (kron_small_bwd.h), `threads` per block.
  virtual void fused_backward_small(int threads, const SmallBwdArgs& a, long long grid, std::size_t smem,
                                    Device device, Stream stream) = 0;
  /// The natural split's fp32 mode-0 pass (kron_head.h).
  virtual void head_pass(const HeadArgs& h, Device device, Stream stream) = 0;
  /// The natural split head's ∂ℓ/∂F partials (HeadGradArgs) over `grid` blocks; false where the
  /// backend has no such pass (the CPU: its GEMM path computes them).
  virtual bool head_grad(const HeadGradArgs& h, long long grid, Device device, Stream stream) {
    (void)h; (void)grid; (void)device; (void)stream;
    return false;
  }
  /// A GEMM step's ∂ℓ/∂F (FactorGradArgs) without per-row partials; false where the backend leaves
  /// it to the batched GEMMs and reductions (CUDA: cuBLAS's strided-batched GEMMs).
  virtual bool factor_grad(DType dtype, const FactorGradArgs& f, Device device, Stream stream) {
    (void)dtype; (void)f; (void)device; (void)stream;
    return false;
  }
  /// The two-factor register-tile fp32 backward (kron_fast_bwd.h), `tile` × `tile` step tiles (8 or 4).
  virtual void fused_backward_fast(int tile, const FastBwdArgs& a, long long grid, std::size_t smem, Device device,
                                   Stream stream) = 0;
  virtual void gemm(DType dtype, const GemmDesc& g, dense::Fp32Math math, Workspace blas, Device device,
                    Stream stream) = 0;
  virtual void reduce(DType dtype, const ReduceDesc& r, Device device, Stream stream) = 0;
  /// Runs rb.d[0 … rb.n − 1]; by default one reduce() each.
  virtual void reduce_batch(DType dtype, const ReduceBatch& rb, Device device, Stream stream) {
    for (int i = 0; i < rb.n; ++i) reduce(dtype, rb.d[i], device, stream);
  }
};

Backend& cpu_backend();
#if SPARSEKERN_WITH_CUDA
Backend& cuda_backend();
#endif

/// Accumulator element size: fp64 for f64, fp32 otherwise.
inline std::size_t acc_size(DType t) { return t == DType::f64 ? 8 : 4; }

}  // namespace sparsekern::kron::detail
