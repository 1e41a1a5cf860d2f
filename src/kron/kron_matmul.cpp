// Dispatch of the Kronecker products: validates once, plans the kernels (kron_plan.cpp), and runs
// the plan's steps on the CPU or CUDA backend. The orchestration (which state goes where) lives
// here once for both backends.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <utility>

#include "../common/check.h"
#include "kron_internal.h"

namespace sparsekern::kron {
namespace {

using detail::Backend;
using detail::FusedArgs;
using detail::GemmDesc;
using detail::ModeDims;
using detail::Plan;
using detail::ReduceDesc;
using detail::SegKind;
using detail::Segment;
using sparsekern::detail::concat;
using sparsekern::detail::device_name;

Backend& backend_for(Device device, const char* op) {
  if (device.type == DeviceType::cpu) return detail::cpu_backend();
#if SPARSEKERN_WITH_CUDA
  return detail::cuda_backend();
#else
  throw BackendUnavailable(concat(op, ": operands are on ", device_name(device),
                                  " but sparsekern was built without CUDA (CPU-only build)"));
#endif
}

/// Checked shapes of one problem.
struct Shapes {
  long long M = 0, P = 1, Q = 1;
  long long R = 1;  ///< ∏ max(pᵢ, qᵢ): a bound on every intermediate state's row length
  std::vector<ModeDims> modes;
};

constexpr long long kMaxExtent = 1LL << 40;

Shapes check_factors(const MatrixView* factors, int n) {
  SK_EXPECTS(n >= 1 && factors != nullptr, "`factors` must hold at least one factor; got ", n);
  Shapes s;
  s.modes.resize(static_cast<std::size_t>(n));
  for (int k = 0; k < n; ++k) {
    const MatrixView& f = factors[k];
    SK_EXPECTS(f.rows >= 1 && f.cols >= 1, "`factors[", k, "]` must have non-zero dims; got ", f.rows,
               "x", f.cols);
    SK_EXPECTS(f.data != nullptr, "`factors[", k, "]` has a null data pointer");
    SK_EXPECTS(f.row_stride >= 0 && f.col_stride >= 0, "`factors[", k,
               "]` must have non-negative strides; got (", f.row_stride, ", ", f.col_stride, ")");
    // cuBLAS steps read factors as (possibly transposed) column-major matrices: one unit stride.
    const bool unit = f.col_stride == 1 || f.row_stride == 1 || f.rows == 1 || f.cols == 1;
    SK_EXPECTS(unit, "`factors[", k, "]` must have a unit stride along one of its dims (row- or "
               "column-major, e.g. a transposed view); got strides (", f.row_stride, ", ", f.col_stride,
               ") for shape ", f.rows, "x", f.cols);
    SK_EXPECTS(f.rows <= INT_MAX / 2 && f.cols <= INT_MAX / 2, "`factors[", k, "]` is too large: ",
               f.rows, "x", f.cols);
    s.modes[k] = ModeDims{f.rows, f.cols};
    SK_EXPECTS(s.P <= kMaxExtent / f.rows && s.Q <= kMaxExtent / f.cols,
               "the Kronecker product of `factors` is too large (more than 2^40 rows or columns)");
    s.P *= f.rows;
    s.Q *= f.cols;
    // The states between factors hold rows of (some q's) × (the other p's) elements: with
    // factors (2^21 × 1), (1 × 2^20), (1 × 2^20) P = 2^21 and Q = 2^40 pass, but a state of 2^61
    // elements wrapped the workspace size to 0 and the product wrote outside the workspace.
    const long long r = std::max(f.rows, f.cols);
    SK_EXPECTS(s.R <= kMaxExtent / r, "the intermediate products of `factors` are too large (more than 2^40 "
               "elements per row between two factors)");
    s.R *= r;
  }
  return s;
}

/// A row-major operand with a unit column stride.
void check_rows(const char* name, const void* data, long long rows, long long cols, long long rs,
                long long cs, long long want_rows, long long want_cols) {
  SK_EXPECTS(rows == want_rows && cols == want_cols, "`", name, "` must be ", want_rows, "x", want_cols,
             "; got ", rows, "x", cols);
  SK_EXPECTS(cs == 1 || cols <= 1, "`", name, "` must have a unit column stride (contiguous rows); got ",
             cs);
  SK_EXPECTS(rs >= cols || rows <= 1, "`", name, "` row stride must be at least its ", cols,
             " columns; got ", rs);
  SK_EXPECTS(data != nullptr || rows * cols == 0, "`", name, "` has a null data pointer");
  SK_EXPECTS(rows <= INT_MAX && rs <= INT_MAX, "`", name, "` is too large for the GPU kernels (", rows,
             " rows, row stride ", rs, "; at most 2^31 − 1)");
}

long long row_ld(long long rs, long long rows, long long cols) { return rows <= 1 ? cols : rs; }

detail::Limits limits_for(Backend& be, Device device) { return be.limits(device); }

bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

/// Kernel arguments of fused group `seg` (pointers filled by the caller).
FusedArgs fused_args(const Segment& seg, const Shapes& sh, const MatrixView* factors) {
  FusedArgs a;
  a.M = sh.M;
  a.L = seg.L;
  a.nf = seg.count;
  int f_off = 0, part_off = 0;
  for (int t = 0; t < seg.count; ++t) {
    const int k = seg.first + t;
    detail::FusedMode& md = a.mode[t];
    md.f = factors[k].data;
    md.f_rs = factors[k].row_stride;
    md.f_cs = factors[k].col_stride;
    md.p = static_cast<int>(sh.modes[k].p);
    md.q = static_cast<int>(sh.modes[k].q);
    md.ppad = (md.p + seg.rn - 1) / seg.rn * seg.rn;
    md.qpad = (md.q + seg.rn - 1) / seg.rn * seg.rn;
    md.f_off = f_off;
    f_off += md.ppad * md.qpad;
    long long lc = 1;
    for (int u = 0; u < seg.count; ++u) {
      if (u < t) lc *= sh.modes[seg.first + u].p;
      if (u > t) lc *= sh.modes[seg.first + u].q;
    }
    md.lc = static_cast<int>(lc);
    md.div_lc = detail::FastDiv(lc);
    md.part_off = part_off;
    part_off += md.p * md.q;
  }
  a.part_stride = seg.part_stride;
  a.s_in = static_cast<int>(seg.s_in);
  a.s_out = static_cast<int>(seg.s_out);
  a.csp = seg.csp;
  a.sh = seg.sh;
  a.div_s_in = detail::FastDiv(seg.s_in);
  a.div_tl = detail::FastDiv(seg.tl);
  a.tm = seg.tm;
  a.tl = seg.tl;
  a.tiles_l = seg.tiles_l;
  a.ntiles = seg.ntiles;
  a.off_buf = seg.off_buf;
  a.off_scratch = seg.off_scratch;
  return a;
}

/// Kernel arguments of the register-tile forward of `seg` (one group over every mode; pointers,
/// vector flags and div_xr filled by the caller).
detail::FastArgs fast_args(const Segment& seg, const Shapes& sh, const MatrixView* factors) {
  const detail::FastLayout lay = detail::fast_layout(sh.modes, seg.fast_chunks, seg.fast_nstage);
  detail::FastArgs a;
  a.M = sh.M;
  a.nf = seg.count;
  for (int t = 0; t < seg.count; ++t) {
    detail::FastStep& st = a.st[t];
    st.f = factors[t].data;
    st.f_rs = factors[t].row_stride;
    st.f_cs = factors[t].col_stride;
    st.p = static_cast<int>(sh.modes[t].p);
    st.q = static_cast<int>(sh.modes[t].q);
    st.qpad = lay.qpad[t];
    st.f_off = lay.f_off[t];
    st.s = lay.s[t];
    st.hs = lay.hs[t];
    st.div_hs = detail::FastDiv(lay.hs[t]);
    st.div_s = detail::FastDiv(lay.s[t]);
    st.hstride = lay.hstride[t];
    if (t >= 1) {  // its output is the state before step t − 1
      st.out_pad = lay.pad[t - 1];
      st.div_pn = detail::FastDiv(sh.modes[t - 1].p);
    }
  }
  a.chunks = seg.fast_chunks;
  a.ntiles = seg.ntiles;
  a.xp = lay.xp;
  a.cs = lay.cs;
  a.off_x0 = lay.off_x0;
  a.off_x1 = lay.off_x1;
  a.off_s = lay.off_s;
  a.nstage = seg.fast_nstage;
  return a;
}

/// Kernel arguments of the fiber-per-thread forward of `seg` (pointers, vec_x and t0 filled by the
/// caller). Shared memory: the transposed factors, then two tile buffers of rows · N floats.
detail::SmallArgs small_args(const Segment& seg, const Shapes& sh, const MatrixView* factors) {
  detail::SmallArgs a;
  a.M = sh.M;
  a.pmax = 8;  // raised to the largest p below
  a.nf = seg.count;
  int off = 0, ls = 0;
  for (int t = seg.count - 1; t >= 0; --t) {
    detail::SmallMode& md = a.md[t];
    md.f = static_cast<const float*>(factors[t].data);
    md.f_rs = factors[t].row_stride;
    md.f_cs = factors[t].col_stride;
    md.p = static_cast<int>(sh.modes[t].p);
    md.ls = ls;
    md.f_off = off;
    off += md.p * md.p;
    a.pmax = std::max(a.pmax, md.p);
    int lp = 0;
    while ((1 << lp) < md.p) ++lp;
    ls += lp;  // the next mode's stride s: × p (a power of two)
  }
  a.ln = ls;  // log2 N
  a.rows = seg.small_rows;
  a.ntiles = seg.ntiles;
  a.off_x0 = off;
  a.off_x1 = off + (seg.small_rows << ls);
  return a;
}

/// Everything one run needs besides the plan.
struct Run {
  Backend* be = nullptr;
  DType dtype{};
  Device device{};
  dense::Fp32Math math{};
  Workspace blas{};
  Stream stream = nullptr;
  const MatrixView* factors = nullptr;
  Shapes sh;
  int vec = 1;  // elements per 16 bytes
  bool x_dense = false;   // X's rows are Π p elements apart (see make_plan)
  bool gx_dense = true;   // the backward's ∂ℓ/∂X (when wanted) too
};

bool vec_ok(const Run& r, const void* p, long long ld, long long chunk) {
  return aligned16(p) && ld % r.vec == 0 && chunk % r.vec == 0;
}

/// The X, Y and kept-T0 operands of the fp32 one-group forwards (FastArgs, SmallArgs).
template <class Args>
void fp32_io(const Run& r, Args& a, const void* in, long long ld_in, void* out, long long ld_out, void* t0) {
  a.x = static_cast<const float*>(in);
  a.ldx = ld_in;
  a.y = static_cast<float*>(out);
  a.ldy = ld_out;
  a.vec_y = vec_ok(r, out, ld_out, 4) ? 1 : 0;
  if (t0 != nullptr) {  // the register-tile backward's kept state (t0_bytes)
    a.t0 = static_cast<float*>(t0);
    a.ldt0 = r.sh.modes[0].p * r.sh.modes[1].q;
  }
}

/// Arguments of kron_head.h's pass over M rows: out (q' × L) = Aᵀ · in (p' × L) per row, with
/// A = F (p' = p, q' = q) or, `transposed`, A = Fᵀ (the backward's pulled-back gradient).
detail::HeadArgs head_args(const void* in, long long ld_in, void* out, long long ld_out, long long M, long long L,
                           const MatrixView& f, bool transposed) {
  detail::HeadArgs h;
  h.x = static_cast<const float*>(in);
  h.ldx = ld_in;
  h.y = static_cast<float*>(out);
  h.ldy = ld_out;
  h.M = M;
  h.L = L;
  h.a = static_cast<const float*>(f.data);
  h.p = static_cast<int>(transposed ? f.cols : f.rows);
  h.q = static_cast<int>(transposed ? f.rows : f.cols);
  h.a_rs = transposed ? f.col_stride : f.row_stride;
  h.a_cs = transposed ? f.row_stride : f.col_stride;
  h.vec = aligned16(in) && aligned16(out) && ld_in % 4 == 0 && ld_out % 4 == 0 ? 1 : 0;
  return h;
}

/// The natural split's tail segment as a product of its own: modes first … n−1 of `r` over
/// M · L rows (s_in wide in, s_out wide out), the segment as one group over every mode with L = 1.
struct NaturalTail {
  Run run;
  Segment seg;
};

NaturalTail natural_tail_run(const Run& r, const Segment& seg) {
  NaturalTail t{r, seg};
  t.run.sh.M = r.sh.M * seg.L;
  t.run.sh.modes.assign(r.sh.modes.begin() + seg.first, r.sh.modes.end());
  t.run.sh.P = seg.s_in;
  t.run.sh.Q = seg.s_out;
  t.run.factors = r.factors + seg.first;
  t.seg.first = 0;
  t.seg.L = 1;
  t.seg.natural = false;
  return t;
}

/// Applies the modes of `seg`: state `in` (M, L, s_in) → `out` (M, s_out, L).
void segment_forward(const Run& r, const Segment& seg, const void* in, long long ld_in, void* out,
                     long long ld_out, void* t0 = nullptr) {
  const long long M = r.sh.M;
  if (M == 0) return;
  if (seg.kind == SegKind::fused && seg.natural) {
    // The natural split's tail (make_plan): modes first … n−1 over M · L rows of s_in, as one
    // whole-row product of those modes. The planner took it only for dense X rows, and the next
    // state's rows are L · s_out apart.
    SK_EXPECTS(ld_in == seg.L * seg.s_in && ld_out == seg.L * seg.s_out,
               "kron: the natural split needs dense rows (internal plan error)");
    const NaturalTail t = natural_tail_run(r, seg);
    segment_forward(t.run, t.seg, in, seg.s_in, out, seg.s_out, t0);  // t0: the tail's, when kept
    return;
  }
  if (seg.kind == SegKind::fused && seg.small) {  // fp32, L = 1: in is X, out is Y
    detail::SmallArgs a = small_args(seg, r.sh, r.factors);
    fp32_io(r, a, in, ld_in, out, ld_out, t0);
    a.vec_x = vec_ok(r, in, ld_in, 4) ? 1 : 0;
    r.be->fused_forward_small(seg.small_threads, a, seg.grid, seg.smem, r.device, r.stream);
    return;
  }
  if (seg.kind == SegKind::fused && seg.fast) {  // fp32, L = 1: in is X, out is Y
    detail::FastArgs a = fast_args(seg, r.sh, r.factors);
    fp32_io(r, a, in, ld_in, out, ld_out, t0);
    const int p_last = a.st[a.nf - 1].p;
    a.vec_x = p_last % 4 == 0 && vec_ok(r, in, ld_in, 4) ? 1 : 0;
    a.div_xr = detail::FastDiv(a.vec_x ? p_last / 4 : p_last);  // vectors or elements per X row
    r.be->fused_forward_fast(seg.fast_tile, seg.fast_threads, a, seg.grid, seg.smem, r.device, r.stream);
    return;
  }
  if (seg.kind == SegKind::fused) {
    FusedArgs a = fused_args(seg, r.sh, r.factors);
    a.x = in;
    a.ldx = ld_in;
    a.y = out;
    a.ldy = ld_out;
    a.vec_x = vec_ok(r, in, ld_in, seg.s_in);
    a.vec_y = seg.L == 1 && vec_ok(r, out, ld_out, seg.s_out);
    r.be->fused_forward(r.dtype, seg.rn, a, seg.grid, seg.smem, r.device, r.stream);
    return;
  }
  const MatrixView& f = r.factors[seg.first];
  const long long p = f.rows, q = f.cols, L = seg.L;
  if (seg.head_pass) {  // the natural split's head through kron_head.h's pass (heads ≤ 8, or SPARSEKERN_KRON_HEAD)
    r.be->head_pass(head_args(in, ld_in, out, ld_out, M, L, f, false), r.device, r.stream);
    return;
  }
  GemmDesc g;
  if (L == 1) {  // out (M × q) = in (M × p) · F
    g.batch = 1; g.m = M; g.k = p; g.n = q;
    g.a = in;  g.a_rs = ld_in; g.a_cs = 1;
    g.b = f.data; g.b_rs = f.row_stride; g.b_cs = f.col_stride;
    g.c = out; g.c_rs = ld_out;
  } else {       // per row m: out_m (q × L) = Fᵀ (q × p) · in_mᵀ (p × L)
    g.batch = M; g.m = q; g.k = p; g.n = L;
    g.a = f.data; g.a_rs = f.col_stride; g.a_cs = f.row_stride; g.a_bs = 0;
    g.b = in; g.b_rs = 1; g.b_cs = p; g.b_bs = ld_in;
    g.c = out; g.c_rs = L; g.c_bs = ld_out;
    if (seg.natural) {  // the natural split's head: in_m is (p × L) itself
      g.b_rs = L;
      g.b_cs = 1;
    }
  }
  r.be->gemm(r.dtype, g, r.math, r.blas, r.device, r.stream);
}

/// Sums the blocks' partial ∂ℓ/∂F of a fused segment into its wanted factor gradients, in one
/// reduce launch. Every fused backward lays them out alike: block b's at b·part_stride, the
/// segment's modes' p×q blocks one after another in mode order (accumulator type). `count`: the
/// blocks that ran (0 writes zeros). `pending` (when given) holds reductions an earlier segment
/// left (the natural split's head), which join that launch.
void reduce_fused_partials(const Run& r, const Segment& seg, const MutableMatrixView* grad_factors,
                           const char* partial, long long count, detail::ReduceBatch* pending = nullptr) {
  const std::size_t as = detail::acc_size(r.dtype);
  detail::ReduceBatch rb;
  if (pending != nullptr) {
    rb = *pending;
    pending->n = 0;
  }
  long long off = 0;
  for (int k = seg.first; grad_factors != nullptr && k < seg.first + seg.count; ++k) {
    const ModeDims& d = r.sh.modes[k];
    if (grad_factors[k].data != nullptr) {
      if (rb.n == detail::kMaxFused) {
        r.be->reduce_batch(r.dtype, rb, r.device, r.stream);
        rb.n = 0;
      }
      ReduceDesc& rd = rb.d[rb.n++];
      rd.partial = partial + static_cast<std::size_t>(off) * as;
      rd.count = count;
      rd.stride = seg.part_stride;
      rd.p = static_cast<int>(d.p);
      rd.q = static_cast<int>(d.q);
      rd.out = grad_factors[k].data;
      rd.out_rs = grad_factors[k].row_stride;
      rd.out_cs = grad_factors[k].col_stride;
    }
    off += d.p * d.q;
  }
  if (rb.n > 0) r.be->reduce_batch(r.dtype, rb, r.device, r.stream);
}

/// Whether the natural split head's ∂ℓ/∂F runs as kron_head_f32.cu's passes: CUDA, fp32, heads of
/// head_grad_pass_pq, L a multiple of 4 and 16-byte aligned rows of X and G. Measured against
/// cuBLAS's strided-batched GEMMs (H100, session 18, device µs of that step): 16 × 16 heads 67 vs
/// 104 (256 × (16⊗16⊗16⊗16)), 8 × 8 heads ~19 µs less of a 195 µs backward (256 × (8⊗8⊗8⊗8⊗8)).
/// 32 × 32 heads took 42.7 µs in the 4 × 4-block pass against cuBLAS's 40.9 (128 × (32⊗32⊗32):
/// it reads each vector of G for 8 blocks of ∂ℓ/∂F). Heads of 16 or 32 by 16 or 32 now take the
/// staged 8 × 8-block pass (head_grad_wide; H100, session 24: 20 µs at 128 × (32⊗32⊗32), 16 × 16
/// heads 67.3 → 59.0 at 256 × (16⊗16⊗16⊗16), and the reduction of its 396 partials instead of
/// 1024 8.0 → 3.5).
bool head_grad_fits(const Run& r, const Segment& seg, long long p, long long q, const void* x, long long ldx,
                    const void* g, long long ldg) {
  return r.device.type == DeviceType::cuda && r.dtype == DType::f32 && seg.natural && seg.L % 4 == 0 &&
         seg.L <= (1LL << 30) && detail::head_grad_pass_pq(p, q) && vec_ok(r, x, ldx, 4) && vec_ok(r, g, ldg, 4);
}

/// A GEMM step's ∂ℓ/∂F (X (M, L, p), G (M, q, L)) through the backend's one-piece path
/// (Backend::factor_grad); false where it has none, or declines these operands.
bool factor_grad_whole(const Run& r, const void* x, long long ldx, const void* g, long long ldg, long long L,
                       const MatrixView& f, const MutableMatrixView& out) {
  detail::FactorGradArgs fg;
  fg.x = x; fg.ldx = ldx;
  fg.g = g; fg.ldg = ldg;
  fg.M = r.sh.M; fg.L = L;
  fg.p = static_cast<int>(f.rows); fg.q = static_cast<int>(f.cols);
  fg.out = out.data; fg.out_rs = out.row_stride; fg.out_cs = out.col_stride;
  return r.be->factor_grad(r.dtype, fg, r.device, r.stream);
}

/// Backward of `seg`: from its input state X (M, L, s_in) and the gradient G (M, s_out, L) of its
/// output, writes ∂ℓ/∂X into `gx` (when not null) and ∂ℓ/∂F of its wanted modes.
void segment_backward(const Run& r, const Segment& seg, const void* x, long long ldx, const void* g,
                      long long ldg, void* gx, long long ldgx, const MutableMatrixView* grad_factors,
                      char* partial, void* acc, const void* t0 = nullptr,
                      detail::ReduceBatch* pending = nullptr) {
  const long long M = r.sh.M;
  const std::size_t as = detail::acc_size(r.dtype);
  auto wants = [&](int k) { return grad_factors != nullptr && grad_factors[k].data != nullptr; };
  if (seg.kind == SegKind::fused && seg.natural) {
    // The natural split's tail (see segment_forward): the backward of modes first … n−1 over M · L
    // rows; the planner took it only for dense rows of X and ∂ℓ/∂X.
    SK_EXPECTS(M == 0 || (ldx == seg.L * seg.s_in && ldg == seg.L * seg.s_out &&
                          (gx == nullptr || ldgx == seg.L * seg.s_in)),
               "kron: the natural split needs dense rows (internal plan error)");
    const NaturalTail t = natural_tail_run(r, seg);
    segment_backward(t.run, t.seg, x, seg.s_in, g, seg.s_out, gx, seg.s_in,
                     grad_factors != nullptr ? grad_factors + seg.first : nullptr, partial, acc, t0, pending);
    return;
  }
  if (seg.kind == SegKind::fused && seg.small_bwd) {  // fp32, one group: x is X, g is ∂ℓ/∂Y
    detail::SmallBwdArgs a;
    a.a = small_args(seg, r.sh, r.factors);
    fp32_io(r, a.a, x, ldx, gx, ldgx, nullptr);  // a.a.y = ∂ℓ/∂X (null: not wanted)
    a.a.vec_x = vec_ok(r, x, ldx, 4) ? 1 : 0;
    a.g = static_cast<const float*>(g);
    a.ldg = ldg;
    a.vec_g = vec_ok(r, g, ldg, 4) ? 1 : 0;
    a.partial = reinterpret_cast<float*>(partial);
    a.part_stride = seg.part_stride;
    // Shared memory after the transposed copies (small_args: they end at a.off_x0): the plain
    // copies, then the pool of tile buffers.
    int off = a.a.off_x0, part = 0;
    for (int t = 0; t < seg.count; ++t) {
      const int p = static_cast<int>(r.sh.modes[t].p);
      a.f2_off[t] = off;
      off += p * p;
      a.part_off[t] = part;
      part += p * p;
      if (wants(t)) a.want_f |= 1 << t;
    }
    a.lean = seg.small_lean ? 1 : 0;
    const int tile = seg.small_rows << a.a.ln;
    SK_EXPECTS(seg.small_nbuf >= 3 && seg.small_nbuf <= 8, "kron: bad small-factor backward plan (",
               seg.small_nbuf, " buffers)");
    for (int k = 0; k < seg.small_nbuf; ++k) {
      a.off_buf[k] = off;
      off += tile;
    }
    SK_EXPECTS(static_cast<std::size_t>(off) * sizeof(float) <= seg.smem, "kron: the small-factor backward's "
               "shared memory (", off * sizeof(float), " bytes) exceeds its plan's ", seg.smem);
    if (seg.ntiles > 0) r.be->fused_backward_small(seg.small_threads, a, seg.grid, seg.smem, r.device, r.stream);
    reduce_fused_partials(r, seg, grad_factors, partial, seg.ntiles > 0 ? seg.grid : 0, pending);
    return;
  }
  if (seg.kind == SegKind::fused && seg.fast) {  // two modes, fp32, L = 1: x is X, g is ∂ℓ/∂Y
    // T0 kept by the forward: its own plan (fewer buffers, so possibly more rows or two stages).
    const bool kept = t0 != nullptr;
    const int tile = kept ? seg.kept_tile : seg.fast_tile;
    const long long ntiles = kept ? seg.kept_ntiles : seg.ntiles, grid = kept ? seg.kept_grid : seg.grid;
    const std::size_t smem = kept ? seg.kept_smem : seg.smem;
    detail::FastBwdArgs a;
    detail::fast_bwd_layout(r.sh.modes, kept ? seg.kept_chunks : seg.fast_chunks,
                            kept ? seg.kept_nstage : seg.fast_nstage, kept, a);
    if (kept) {
      a.t0 = static_cast<const float*>(t0);
      a.ldt0 = static_cast<long long>(a.p0) * a.q1;
    }
    a.x = static_cast<const float*>(x); a.ldx = ldx;
    a.g = static_cast<const float*>(g); a.ldg = ldg;
    a.gx = static_cast<float*>(gx); a.ldgx = ldgx;
    a.partial = reinterpret_cast<float*>(partial);
    a.part_stride = seg.part_stride;
    a.M = M;
    a.f0 = r.factors[0].data; a.f0_rs = r.factors[0].row_stride; a.f0_cs = r.factors[0].col_stride;
    a.f1 = r.factors[1].data; a.f1_rs = r.factors[1].row_stride; a.f1_cs = r.factors[1].col_stride;
    a.ntiles = ntiles;
    a.div_p0 = detail::FastDiv(a.p0);
    a.div_q0 = detail::FastDiv(a.q0);
    a.div_q1 = detail::FastDiv(a.q1);
    a.vec_x = vec_ok(r, x, ldx, 4) ? 1 : 0;
    a.vec_g = vec_ok(r, g, ldg, 4) ? 1 : 0;
    a.vec_gx = gx != nullptr && vec_ok(r, gx, ldgx, 4) ? 1 : 0;
    if (ntiles > 0) r.be->fused_backward_fast(tile, a, grid, smem, r.device, r.stream);
    reduce_fused_partials(r, seg, grad_factors, partial, ntiles > 0 ? grid : 0, pending);
    return;
  }
  if (seg.kind == SegKind::fused) {
    FusedArgs a = fused_args(seg, r.sh, r.factors);
    a.x = x; a.ldx = ldx;
    a.g = g; a.ldg = ldg;
    a.gx = gx; a.ldgx = ldgx;
    a.partial = partial;
    a.vec_x = vec_ok(r, x, ldx, seg.s_in);
    a.vec_g = seg.L == 1 && vec_ok(r, g, ldg, seg.s_out);
    a.vec_gx = gx != nullptr && vec_ok(r, gx, ldgx, seg.s_in);
    if (seg.ntiles > 0) r.be->fused_backward(r.dtype, seg.rn, a, seg.grid, seg.smem, r.device, r.stream);
    reduce_fused_partials(r, seg, grad_factors, partial, seg.ntiles > 0 ? seg.grid : 0, pending);
    return;
  }
  const int k = seg.first;
  const MatrixView& f = r.factors[k];
  const long long p = f.rows, q = f.cols, L = seg.L;
  const std::size_t es = dtype_size(r.dtype);
  if (wants(k)) {
    ReduceDesc rd;
    rd.p = static_cast<int>(p);
    rd.q = static_cast<int>(q);
    rd.stride = p * q;
    rd.out = grad_factors[k].data;
    rd.out_rs = grad_factors[k].row_stride;
    rd.out_cs = grad_factors[k].col_stride;
    if (M == 0) {
      rd.count = 0;
      r.be->reduce(r.dtype, rd, r.device, r.stream);
    } else if (L == 1) {  // ∂ℓ/∂F (p × q) = Xᵀ (p × M) · G (M × q)
      GemmDesc gd;
      gd.batch = 1; gd.m = p; gd.k = M; gd.n = q;
      gd.a = x; gd.a_rs = 1; gd.a_cs = ldx;
      gd.b = g; gd.b_rs = ldg; gd.b_cs = 1;
      gd.c = partial; gd.c_rs = q; gd.c_acc = true;
      r.be->gemm(r.dtype, gd, r.math, r.blas, r.device, r.stream);
      rd.partial = partial;
      rd.count = 1;
      r.be->reduce(r.dtype, rd, r.device, r.stream);
    } else if (head_grad_fits(r, seg, p, q, x, ldx, g, ldg)) {
      // The natural split's head, fp32: one pass over X and G (kron_head_f32.cu) in work items of
      // (row, chunk of ≥ 64 column vectors), enough for every block of the grid (kHeadGradBlocks,
      // the partials the plan's workspace holds for a natural split).
      detail::HeadGradArgs hg;
      hg.x = static_cast<const float*>(x); hg.ldx = ldx;
      hg.g = static_cast<const float*>(g); hg.ldg = ldg;
      hg.M = M;
      hg.L = static_cast<int>(L);
      hg.p = static_cast<int>(p);
      hg.q = static_cast<int>(q);
      hg.partial = reinterpret_cast<float*>(partial);
      const long long lv = L / 4;
      hg.lc = static_cast<int>(
          std::clamp<long long>((detail::kHeadGradBlocks + M - 1) / M, 1, std::max<long long>(lv / 64, 1)));
      long long grid = std::min(M * hg.lc, detail::kHeadGradBlocks);
      if (detail::head_grad_wide(p, q)) {  // persistent: as many blocks as stay resident, over items of kc columns
        const long long kc = detail::head_grad_wide_cols(static_cast<int>(p), static_cast<int>(q));
        grid = std::min({M * ((L + kc - 1) / kc),
                         static_cast<long long>(detail::kHeadGradWideBlocksPerSM) * limits_for(*r.be, r.device).num_sms,
                         detail::kHeadGradBlocks});
      }
      if (!r.be->head_grad(hg, grid, r.device, r.stream))
        throw InvalidArgument("kron: internal error: the head's gradient pass is not on this device");
      rd.partial = partial;
      rd.count = grid;
      if (pending != nullptr && pending->n < detail::kMaxFused)
        pending->d[pending->n++] = rd;  // summed with the tail's (matmul_backward)
      else
        r.be->reduce(r.dtype, rd, r.device, r.stream);
    } else if (!seg.natural && factor_grad_whole(r, x, ldx, g, ldg, L, f, grad_factors[k])) {
      // The backend summed it in one piece (the CPU: one GEMM per chunk of rows; kron_matmul_cpu.cpp).
    } else {  // Σ over rows m of X_mᵀ (p × L) · G_mᵀ (L × q), in chunks of rows
      for (long long m0 = 0; m0 < M; m0 += seg.gemm_chunk) {
        const long long nb = std::min(seg.gemm_chunk, M - m0);
        GemmDesc gd;
        gd.batch = nb; gd.m = p; gd.k = L; gd.n = q;
        gd.a = static_cast<const char*>(x) + static_cast<std::size_t>(m0 * ldx) * es;
        gd.a_rs = 1; gd.a_cs = p; gd.a_bs = ldx;
        if (seg.natural) {  // X_m is (p × L) itself
          gd.a_rs = L;
          gd.a_cs = 1;
        }
        gd.b = static_cast<const char*>(g) + static_cast<std::size_t>(m0 * ldg) * es;
        gd.b_rs = 1; gd.b_cs = L; gd.b_bs = ldg;
        gd.c = partial; gd.c_rs = q; gd.c_bs = p * q; gd.c_acc = true;
        r.be->gemm(r.dtype, gd, r.math, r.blas, r.device, r.stream);
        const bool last = m0 + nb >= M;
        rd.partial = partial;
        rd.count = nb;
        rd.acc_in = m0 == 0 ? nullptr : acc;
        rd.acc_out = last ? nullptr : acc;
        r.be->reduce(r.dtype, rd, r.device, r.stream);
      }
    }
  }
  if (gx != nullptr && M > 0) {
    if (seg.head_pass) {  // the natural split's head through kron_head.h's pass, with A = Fᵀ
      r.be->head_pass(head_args(g, ldg, gx, ldgx, M, L, f, true), r.device, r.stream);
      return;
    }
    GemmDesc gd;
    if (seg.natural) {  // the natural split's head: per row m, (p × L) = F (p × q) · G_m (q × L)
      gd.batch = M; gd.m = p; gd.k = q; gd.n = L;
      gd.a = f.data; gd.a_rs = f.row_stride; gd.a_cs = f.col_stride; gd.a_bs = 0;
      gd.b = g; gd.b_rs = L; gd.b_cs = 1; gd.b_bs = ldg;
      gd.c = gx; gd.c_rs = L; gd.c_bs = ldgx;
    } else {
      if (L == 1) {  // ∂ℓ/∂X (M × p) = G (M × q) · Fᵀ (q × p)
        gd.batch = 1; gd.m = M; gd.k = q; gd.n = p;
        gd.a = g; gd.a_rs = ldg; gd.a_cs = 1;
      } else {       // per row m: (L × p) = G_mᵀ (L × q) · Fᵀ (q × p)
        gd.batch = M; gd.m = L; gd.k = q; gd.n = p;
        gd.a = g; gd.a_rs = 1; gd.a_cs = L; gd.a_bs = ldg;
      }
      gd.b = f.data; gd.b_rs = f.col_stride; gd.b_cs = f.row_stride; gd.b_bs = 0;
      gd.c = gx; gd.c_rs = L == 1 ? ldgx : p; gd.c_bs = L == 1 ? 0 : ldgx;
    }
    r.be->gemm(r.dtype, gd, r.math, r.blas, r.device, r.stream);
  }
}

Run make_run(DType dtype, Device device, const MatrixView* factors, int n, dense::Fp32Math math,
             Workspace blas, Stream stream, const char* op) {
  SK_EXPECTS_TYPE(::sparsekern::detail::valid_dtype(dtype), op, ": `dtype` ", static_cast<int>(dtype),
                  " is not a DType");
  SK_EXPECTS(math == dense::Fp32Math::ieee || math == dense::Fp32Math::tf32, op, ": `fp32_math` ",
             static_cast<int>(math), " is not an Fp32Math");
  Run r;
  r.be = &backend_for(device, op);
  r.dtype = dtype;
  r.device = device;
  r.math = math;
  r.blas = blas;
  r.stream = stream;
  r.factors = factors;
  r.sh = check_factors(factors, n);
  r.vec = static_cast<int>(16 / dtype_size(dtype));
  return r;
}

/// Elements a view spans (0 when empty, -1 past 64-bit offsets).
template <class View>
long long span_of(const View& v) {
  return ::sparsekern::detail::span_elements({{v.rows, v.row_stride}, {v.cols, v.col_stride}}, 8);
}

/// Whether `ws` (bytes) shares memory with the view `v` of `elem`-byte elements.
template <class View>
bool ws_overlaps(const Workspace& ws, const View& v, std::int64_t elem) {
  return ::sparsekern::detail::ranges_overlap(ws.data, static_cast<std::int64_t>(ws.bytes), v.data, span_of(v) * elem, 1);
}

void check_workspace(const Workspace& ws, std::size_t need, const char* fn) {
  SK_EXPECTS(ws.bytes >= need, "`workspace` must hold at least ", need, " bytes (", fn,
             "_workspace_size); got ", ws.bytes);
  SK_EXPECTS(need == 0 || ws.data != nullptr, "`workspace` has a null data pointer");
}

Run checked_forward(const MatmulParams& p, Stream stream) {
  Run r = make_run(p.dtype, p.device, p.factors, p.num_factors, p.fp32_math, p.blas_workspace, stream,
                   "kron::matmul");
  const long long M = p.x.rows;
  SK_EXPECTS(M >= 0, "`x` must have a non-negative number of rows; got ", M);
  SK_EXPECTS(M <= (1LL << 59) / r.sh.R, "`x` has too many rows (", M, ") for the size of the product's states");
  r.sh.M = M;
  check_rows("x", p.x.data, p.x.rows, p.x.cols, p.x.row_stride, p.x.col_stride, M, r.sh.P);
  check_rows("y", p.y.data, p.y.rows, p.y.cols, p.y.row_stride, p.y.col_stride, M, r.sh.Q);
  r.x_dense = row_ld(p.x.row_stride, M, r.sh.P) == r.sh.P;
  const auto elem = static_cast<std::int64_t>(dtype_size(p.dtype));
  SK_EXPECTS(M == 0 || (p.y.data != p.x.data && !::sparsekern::detail::ranges_overlap(
                                                    p.y.data, span_of(p.y), p.x.data, span_of(p.x), elem)),
             "`y` must not share memory with `x`");
  return r;
}

Plan plan_for(const Run& r, bool backward) {
  return detail::make_plan(r.sh.M, r.sh.modes, r.dtype, limits_for(*r.be, r.device), backward,
                           r.x_dense && (!backward || r.gx_dense));
}

/// Bytes of the saved-states region of the backward plan `bwd` (its input states of groups 1 …
/// NS−1, laid out at bwd.off_saved[s], first in its workspace) when the forward plan `fwd` runs
/// the same groups, so that the forward's intermediate outputs are exactly those states; else 0.
std::size_t saved_bytes(const Plan& fwd, const Plan& bwd) {
  const std::size_t NS = bwd.segs.size();
  if (NS < 2 || fwd.segs.size() != NS || fwd.state != bwd.state) return 0;
  for (std::size_t s = 0; s < NS; ++s)
    if (fwd.segs[s].first != bwd.segs[s].first || fwd.segs[s].count != bwd.segs[s].count ||
        fwd.segs[s].natural != bwd.segs[s].natural)  // a natural-order state is laid out unlike a rotated one
      return 0;
  return bwd.off_grad[0];  // the saved states come first; the state gradients start after them
}

std::size_t align256(std::size_t n) { return (n + 255) / 256 * 256; }

/// Bytes of the state T0 = X·F1 (M rows of p0·q1 fp32) that a two-factor product keeps for the
/// register-tile backward: when the forward segment is the register-tile or the small-factor
/// forward (whose first step or pass computes T0 anyway) and the backward's the register-tile
/// backward (which otherwise recomputes it: one of its five GEMMs, and a transposed copy of X); else 0.
std::size_t t0_bytes(const Run& r, const Segment& fwd, const Segment& bwd) {
  if (r.sh.modes.size() != 2 || !(fwd.fast || fwd.small) || !bwd.fast) return 0;
  const std::size_t n = static_cast<std::size_t>(r.sh.M) * static_cast<std::size_t>(r.sh.modes[0].p) *
                        static_cast<std::size_t>(r.sh.modes[1].q);
  return align256(n * sizeof(float));
}

std::size_t t0_bytes(const Run& r, const Plan& fwd, const Plan& bwd) {
  if (fwd.segs.size() != 1 || bwd.segs.size() != 1) return 0;
  return t0_bytes(r, fwd.segs[0], bwd.segs[0]);
}

/// The natural split's tail keeps its T0 likewise, when its tail is a two-factor product of those
/// kernels in both plans (e.g. 128 × (32⊗32⊗32): the tail's backward over 4096 rows took 79.7 µs
/// recomputing T0 and 58.5 µs as a product of its own with T0 kept; H100, session 20). It sits in
/// the caller's saved_states after the saved states (from align256 of their bytes); 0 where there
/// is none.
std::size_t natural_t0_bytes(const Run& r, const Plan& fwd, const Plan& bwd) {
  if (fwd.segs.size() != 2 || bwd.segs.size() != 2 || !fwd.segs[0].natural || !bwd.segs[0].natural ||
      fwd.segs[0].kind != SegKind::fused || bwd.segs[0].kind != SegKind::fused)
    return 0;
  const NaturalTail tf = natural_tail_run(r, fwd.segs[0]), tb = natural_tail_run(r, bwd.segs[0]);
  return t0_bytes(tf.run, tf.seg, tb.seg);
}

/// The same from the forward's side: plans the backward (into `bwd`) only when the forward has
/// intermediate states at all (several groups, or the register-tile forward of two modes), so that
/// other one-group products (most fused ones) pay no second plan. `t0_off` (when given) receives
/// where in the region a kept T0 goes (0 when none is kept, or the two-factor T0 at the start).
std::size_t saved_bytes(const Run& r, const Plan& fwd, Plan& bwd, std::size_t* t0_off = nullptr) {
  if (t0_off != nullptr) *t0_off = 0;
  const bool fast2 = fwd.segs.size() == 1 && (fwd.segs[0].fast || fwd.segs[0].small) && r.sh.modes.size() == 2;
  if (fwd.segs.size() < 2 && !fast2) return 0;
  bwd = plan_for(r, true);
  if (fast2) return t0_bytes(r, fwd, bwd);
  const std::size_t states = saved_bytes(fwd, bwd);
  const std::size_t t0 = states > 0 ? natural_t0_bytes(r, fwd, bwd) : 0;
  if (t0 == 0) return states;
  if (t0_off != nullptr) *t0_off = align256(states);
  return align256(states) + t0;
}

/// Whether `saved` (a caller's saved_states buffer) is to be used: given and needed. A buffer that
/// is given but too small is an error (it was made for other shapes), not silently ignored.
bool use_saved(const Workspace& saved, std::size_t need, const char* fn) {
  if (saved.data == nullptr || need == 0) return false;
  SK_EXPECTS(saved.bytes >= need, "`saved_states` must hold at least ", need,
             " bytes (matmul_saved_states_size); got ", saved.bytes, " (", fn, ")");
  return true;
}

}  // namespace

std::size_t matmul_saved_states_size(const MatmulParams& p) {
  const Run r = checked_forward(p, nullptr);
  Plan bwd;
  return saved_bytes(r, plan_for(r, false), bwd);
}

std::size_t matmul_workspace_size(const MatmulParams& p) {
  const Run r = checked_forward(p, nullptr);
  const Plan plan = plan_for(r, false);
  Plan bwd;
  if (p.saved_states.data != nullptr && saved_bytes(r, plan, bwd) > 0) return 0;
  return plan.ws_bytes;
}

void matmul(const MatmulParams& p, Stream stream) {
  const Run r = checked_forward(p, stream);
  const Plan plan = plan_for(r, false);
  // Keeping the states: each group's output goes where the backward plan reads that state.
  Plan bwd;
  bool keep = false;
  std::size_t t0_off = 0;
  if (p.saved_states.data != nullptr)
    keep = use_saved(p.saved_states, saved_bytes(r, plan, bwd, &t0_off), "matmul");
  // A kept T0: the two-factor product's (the whole region), or the natural split tail's (after the
  // states), written by the first segment.
  void* t0 = nullptr;
  if (keep && plan.segs.size() == 1) t0 = p.saved_states.data;
  else if (keep && t0_off > 0) t0 = static_cast<char*>(p.saved_states.data) + t0_off;
  if (!keep) {
    check_workspace(p.workspace, plan.ws_bytes, "matmul");
    const auto elem = static_cast<std::int64_t>(dtype_size(p.dtype));
    SK_EXPECTS(plan.ws_bytes == 0 || (!ws_overlaps(p.workspace, p.x, elem) && !ws_overlaps(p.workspace, p.y, elem)),
               "`workspace` must not share memory with `x` or `y`");
  }
  if (r.sh.M == 0) return;
  const std::size_t NS = plan.segs.size();
  char* ws = static_cast<char*>(p.workspace.data);
  char* saved = static_cast<char*>(p.saved_states.data);
  const std::size_t off[2] = {plan.off_ping, plan.off_pong};
  const void* in = p.x.data;
  long long ld_in = row_ld(p.x.row_stride, r.sh.M, r.sh.P);
  for (std::size_t s = 0; s < NS; ++s) {
    const bool last = s + 1 == NS;
    void* out = last ? p.y.data : keep ? saved + bwd.off_saved[s + 1] : ws + off[s % 2];
    const long long ld_out = last ? row_ld(p.y.row_stride, r.sh.M, r.sh.Q) : plan.state[s + 1];
    segment_forward(r, plan.segs[s], in, ld_in, out, ld_out, s == 0 ? t0 : nullptr);
    in = out;
    ld_in = ld_out;
  }
}

namespace {

Run checked_backward(const MatmulBackwardParams& p, Stream stream) {
  Run r = make_run(p.dtype, p.device, p.factors, p.num_factors, p.fp32_math, p.blas_workspace, stream,
                   "kron::matmul_backward");
  const long long M = p.x.rows;
  SK_EXPECTS(M >= 0, "`x` must have a non-negative number of rows; got ", M);
  SK_EXPECTS(M <= (1LL << 59) / r.sh.R, "`x` has too many rows (", M, ") for the size of the product's states");
  r.sh.M = M;
  check_rows("x", p.x.data, p.x.rows, p.x.cols, p.x.row_stride, p.x.col_stride, M, r.sh.P);
  check_rows("grad_y", p.grad_y.data, p.grad_y.rows, p.grad_y.cols, p.grad_y.row_stride,
             p.grad_y.col_stride, M, r.sh.Q);
  r.x_dense = row_ld(p.x.row_stride, M, r.sh.P) == r.sh.P;
  if (p.grad_x.data != nullptr) {
    check_rows("grad_x", p.grad_x.data, p.grad_x.rows, p.grad_x.cols, p.grad_x.row_stride,
               p.grad_x.col_stride, M, r.sh.P);
    r.gx_dense = row_ld(p.grad_x.row_stride, M, r.sh.P) == r.sh.P;
    const auto elem = static_cast<std::int64_t>(dtype_size(p.dtype));
    SK_EXPECTS(M == 0 || (p.grad_x.data != p.x.data && p.grad_x.data != p.grad_y.data &&
                          !::sparsekern::detail::ranges_overlap(p.grad_x.data, span_of(p.grad_x), p.x.data,
                                                                span_of(p.x), elem) &&
                          !::sparsekern::detail::ranges_overlap(p.grad_x.data, span_of(p.grad_x), p.grad_y.data,
                                                                span_of(p.grad_y), elem)),
               "`grad_x` must not share memory with `x` or `grad_y`");
  }
  if (p.grad_factors != nullptr) {
    for (int k = 0; k < p.num_factors; ++k) {
      const MutableMatrixView& gf = p.grad_factors[k];
      if (gf.data == nullptr) continue;
      SK_EXPECTS(gf.rows == r.sh.modes[k].p && gf.cols == r.sh.modes[k].q, "`grad_factors[", k,
                 "]` must be ", r.sh.modes[k].p, "x", r.sh.modes[k].q, "; got ", gf.rows, "x", gf.cols);
      SK_EXPECTS(gf.row_stride >= 0 && gf.col_stride >= 0, "`grad_factors[", k,
                 "]` must have non-negative strides");
      for (int u = 0; u < p.num_factors; ++u)
        SK_EXPECTS(gf.data != p.factors[u].data && (u == k || gf.data != p.grad_factors[u].data),
                   "`grad_factors[", k, "]` must not alias a factor or another gradient");
      SK_EXPECTS(gf.data != p.x.data && gf.data != p.grad_y.data && gf.data != p.grad_x.data,
                 "`grad_factors[", k, "]` must not alias `x`, `grad_y` or `grad_x`");
      SK_EXPECTS(::sparsekern::detail::self_disjoint({{gf.rows, gf.row_stride}, {gf.cols, gf.col_stride}}),
                 "`grad_factors[", k, "]` must not overlap itself: strides (", gf.row_stride, ", ", gf.col_stride,
                 ") for ", gf.rows, "x", gf.cols);
      const auto elem = static_cast<std::int64_t>(dtype_size(p.dtype));
      const std::int64_t g_span = span_of(gf);
      SK_EXPECTS(g_span >= 0, "`grad_factors[", k, "]`: strides overflow 64-bit offsets");
      const bool apart = !::sparsekern::detail::ranges_overlap(gf.data, g_span, p.x.data, span_of(p.x), elem) &&
                         !::sparsekern::detail::ranges_overlap(gf.data, g_span, p.grad_y.data, span_of(p.grad_y), elem) &&
                         !::sparsekern::detail::ranges_overlap(gf.data, g_span, p.grad_x.data, span_of(p.grad_x), elem);
      SK_EXPECTS(apart, "`grad_factors[", k, "]` must not share memory with `x`, `grad_y` or `grad_x`");
    }
  }
  return r;
}

/// The backward's plan, and the bytes of its saved-states region that a caller's `saved_states`
/// provides (0: recompute them in the workspace).
/// A kept T0 (register-tile backward of two modes) comes in `saved_states` too, but apart from the
/// workspace (shift 0): `t0` says whether it is there.
struct BackwardPlan {
  Plan plan;
  std::size_t shift = 0;
  const void* t0 = nullptr;  ///< a kept T0 for the first segment (two factors, or the natural split's tail)
};

BackwardPlan backward_plan(const Run& r, const MatmulBackwardParams& p, const char* fn) {
  BackwardPlan b;
  b.plan = plan_for(r, true);
  if (p.saved_states.data != nullptr && b.plan.segs.size() >= 2) {
    const Plan fwd = plan_for(r, false);
    const std::size_t need = saved_bytes(fwd, b.plan);
    const std::size_t t0 = need > 0 ? natural_t0_bytes(r, fwd, b.plan) : 0;
    if (use_saved(p.saved_states, t0 > 0 ? align256(need) + t0 : need, fn)) {
      b.shift = need;
      if (t0 > 0) b.t0 = static_cast<const char*>(p.saved_states.data) + align256(need);
    }
  } else if (p.saved_states.data != nullptr && b.plan.segs.size() == 1 && b.plan.segs[0].fast) {
    if (use_saved(p.saved_states, t0_bytes(r, plan_for(r, false), b.plan), fn)) b.t0 = p.saved_states.data;
  }
  return b;
}

}  // namespace

std::size_t matmul_backward_workspace_size(const MatmulBackwardParams& p) {
  const BackwardPlan b = backward_plan(checked_backward(p, nullptr), p, "matmul_backward_workspace_size");
  return b.plan.ws_bytes - b.shift;
}

void matmul_backward(const MatmulBackwardParams& p, Stream stream) {
  const Run r = checked_backward(p, stream);
  const BackwardPlan bp = backward_plan(r, p, "matmul_backward");
  const Plan& plan = bp.plan;
  const std::size_t shift = bp.shift;
  check_workspace(p.workspace, plan.ws_bytes - shift, "matmul_backward");
  {
    const auto elem = static_cast<std::int64_t>(dtype_size(p.dtype));
    const bool ws_used = plan.ws_bytes - shift > 0;
    SK_EXPECTS(!ws_used || (!ws_overlaps(p.workspace, p.x, elem) && !ws_overlaps(p.workspace, p.grad_y, elem) &&
                            !ws_overlaps(p.workspace, p.grad_x, elem)),
               "`workspace` must not share memory with `x`, `grad_y` or `grad_x`");
    for (int k = 0; ws_used && p.grad_factors != nullptr && k < p.num_factors; ++k)
      SK_EXPECTS(!ws_overlaps(p.workspace, p.grad_factors[k], elem), "`workspace` must not share memory with "
                 "`grad_factors[", k, "]`");
  }
  const int NS = static_cast<int>(plan.segs.size());
  const long long M = r.sh.M;
  const bool want_gx = p.grad_x.data != nullptr;
  auto seg_wants = [&](const Segment& seg) {
    if (p.grad_factors == nullptr) return false;
    for (int k = seg.first; k < seg.first + seg.count; ++k)
      if (p.grad_factors[k].data != nullptr) return true;
    return false;
  };
  int s_min = want_gx ? 0 : NS;
  for (int s = 0; s < NS && s_min == NS; ++s)
    if (seg_wants(plan.segs[s])) s_min = s;
  if (s_min == NS) return;  // nothing wanted

  // The workspace holds the plan's regions from offset `shift` on (the saved states, at the start
  // of the plan's layout, are the caller's buffer when shift > 0).
  char* ws = static_cast<char*>(p.workspace.data);
  auto at = [&](std::size_t off) { return ws + (off - shift); };
  const long long ldx = row_ld(p.x.row_stride, M, r.sh.P);
  // The input state of every group after the first: kept by the forward, or recomputed here.
  auto saved = [&](int s) -> char* {
    return shift > 0 ? static_cast<char*>(p.saved_states.data) + plan.off_saved[s] : at(plan.off_saved[s]);
  };
  if (M > 0 && shift == 0) {
    const void* in = p.x.data;
    long long ld_in = ldx;
    for (int s = 0; s + 1 < NS; ++s) {
      segment_forward(r, plan.segs[s], in, ld_in, saved(s + 1), plan.state[s + 1]);
      in = saved(s + 1);
      ld_in = plan.state[s + 1];
    }
  }
  // Walk the groups from the output back, pulling the gradient through each. A natural split's
  // head leaves the reduction of its ∂ℓ/∂F pass's partials to the tail's launch (one launch for
  // both: several µs on a 100 µs backward); the tail's partials then go after the head's (the
  // planner sizes the region for both).
  detail::ReduceBatch pending;
  const bool natural = NS == 2 && plan.segs[0].natural;
  const std::size_t as = detail::acc_size(r.dtype);
  const void* g = p.grad_y.data;
  long long ldg = row_ld(p.grad_y.row_stride, M, r.sh.Q);
  for (int s = NS - 1; s >= s_min; --s) {
    const void* x = s == 0 ? p.x.data : saved(s);
    const long long ld_x = s == 0 ? ldx : plan.state[s];
    void* gx = nullptr;
    long long ldgx = 0;
    if (s > s_min) {
      gx = at(plan.off_grad[s % 2]);
      ldgx = plan.state[s];
    } else if (s == 0 && want_gx) {
      gx = p.grad_x.data;
      ldgx = row_ld(p.grad_x.row_stride, M, r.sh.P);
    }
    char* part = at(plan.off_partial);
    if (s == 0 && pending.n > 0)
      part += align256(static_cast<std::size_t>(pending.d[0].count * pending.d[0].stride) * as);
    segment_backward(r, plan.segs[s], x, ld_x, g, ldg, gx, ldgx, p.grad_factors, part, at(plan.off_acc),
                     s == 0 ? bp.t0 : nullptr, natural ? &pending : nullptr);
    g = gx;
    ldg = ldgx;
  }
  if (pending.n > 0) r.be->reduce_batch(r.dtype, pending, r.device, r.stream);  // the tail did not run
}

std::string describe_plan(const MatmulParams& p, bool backward) {
  Run r = make_run(p.dtype, p.device, p.factors, p.num_factors, p.fp32_math, p.blas_workspace, nullptr,
                   "kron::describe_plan");
  r.sh.M = std::max<long long>(p.x.rows, 0);
  r.x_dense = row_ld(p.x.row_stride, r.sh.M, r.sh.P) == r.sh.P;
  const Plan plan = plan_for(r, backward);
  // Built with detail::append, not iostreams: see src/common/check.h (iostreams crashed inside our
  // module on the GPU machine, whose toolchain links libstdc++ statically).
  using sparsekern::detail::append;
  using sparsekern::detail::concat;
  std::string os;
  for (const Segment& seg : plan.segs) {
    append(os, concat(seg.kind == SegKind::fused ? "fused" : seg.head_pass ? "head" : "cublas", " modes ", seg.first));
    if (seg.count > 1) append(os, concat("-", seg.first + seg.count - 1));
    append(os, " [");
    for (int k = seg.first; k < seg.first + seg.count; ++k)
      append(os, concat(k > seg.first ? " " : "", r.sh.modes[k].p, "x", r.sh.modes[k].q));
    append(os, concat("] L=", seg.L));
    if (seg.natural) append(os, seg.kind == SegKind::fused ? " order=natural rows=M*L" : " order=natural");
    if (seg.kind == SegKind::fused && seg.fast && plan.backward) {
      detail::FastBwdArgs ka;
      detail::fast_bwd_layout(r.sh.modes, seg.kept_chunks, seg.kept_nstage, true, ka);
      append(os, concat(" chunk=", seg.s_in, "->", seg.s_out, " kernel=regtile-bwd regs=", seg.fast_tile, "x",
                        seg.fast_tile, " rows=", seg.fast_chunks, " stages=", seg.fast_nstage, " smem=", seg.smem,
                        " tiles=", seg.ntiles, " grid=", seg.grid, "; with T0 kept: regs=", seg.kept_tile, "x",
                        seg.kept_tile, " rows=", seg.kept_chunks, " stages=", seg.kept_nstage, " smem=", seg.kept_smem,
                        " tiles=", seg.kept_ntiles, " grid=", seg.kept_grid, ka.alias ? " alias" : ""));
    } else if (seg.kind == SegKind::fused && seg.small_bwd) {
      append(os, concat(" chunk=", seg.s_in, "->", seg.s_out, " kernel=small-bwd threads=", seg.small_threads,
                        " rows=", seg.small_rows, " bufs=", seg.small_nbuf, seg.small_lean ? " lean" : "",
                        " smem=", seg.smem,
                        " tiles=", seg.ntiles, " grid=", seg.grid));
    } else if (seg.kind == SegKind::fused && seg.small) {
      append(os, concat(" chunk=", seg.s_in, "->", seg.s_out, " kernel=small threads=", seg.small_threads,
                        " rows=", seg.small_rows, " smem=", seg.smem, " tiles=", seg.ntiles, " grid=", seg.grid));
    } else if (seg.kind == SegKind::fused && seg.fast) {
      append(os, concat(" chunk=", seg.s_in, "->", seg.s_out, " kernel=fast regs=", seg.fast_tile, "x",
                        seg.fast_tile, " threads=", seg.fast_threads, " rows=", seg.fast_chunks, " stages=", seg.fast_nstage,
                        " smem=", seg.smem, " tiles=", seg.ntiles, " grid=", seg.grid));
    } else if (seg.kind == SegKind::fused) {
      append(os, concat(" chunk=", seg.s_in, "->", seg.s_out, " max=", seg.s_max, " tile=", seg.tm, "x",
                        seg.tl, " rn=", seg.rn, " pad=", 1 << seg.sh, " smem=", seg.smem, " grid=", seg.grid));
    }
    append(os, "\n");
  }
  append(os, concat("workspace=", plan.ws_bytes));
  return os;
}

}  // namespace sparsekern::kron
