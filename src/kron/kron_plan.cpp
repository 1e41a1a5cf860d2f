// Execution planning of Kronecker products: which modes fuse into one kernel, the tile of each fused
// kernel, and the workspace layout. Host code shared by the CPU and CUDA backends (the CPU backend
// plans for a virtual GPU so that its tests exercise the same groups and tiles).
//
// Tile table (how each fused kernel is shaped, and why):
//   factor p or q > 64        → one mode per cuBLAS strided-batched GEMM (kMaxFusedDim)
//   single factor (n = 1)     → one plain cuBLAS GEMM: X·F is exactly a GEMM, cuBLAS's is tuned
//   otherwise                 → fused groups, greedily from the last mode, as long as the group's
//                               largest chunk state fits the shared-memory budget with one chunk
//   register tile             → 4 rows × 8 columns per thread; 4 columns when every q (and p in
//                               the backward) is ≤ 4, where an 8-wide tile would be mostly padding
//   chunks per block C        → as many as the budget allows, up to ~8192 elements per buffer
//                               (32 KB of fp32: enough rows for all 8 warps' tiles, and two or
//                               three blocks per SM), and no more than leaves ≥ 2 tiles per SM
//   tile shape (tm × tl)      → tl consecutive outer indices first (the output of a chunk is
//                               strided by L; neighbouring l make the stores contiguous), rows after
#include <algorithm>
#include <limits>

#include "../common/check.h"
#include "kron_internal.h"
#include "kron_tile.h"

namespace sparsekern::kron::detail {
namespace {

constexpr std::size_t kAlign = 256;
std::size_t align_up(std::size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }
long long round_up(long long v, long long m) { return (v + m - 1) / m * m; }

/// Chunk stride in shared memory: room for the swizzled largest state, odd so that consecutive
/// chunks start in different banks (stores that walk across chunks are then conflict-free).
int chunk_stride(long long s_max) { return static_cast<int>((s_max + ((s_max - 1) >> 5)) | 1); }

bool fusable(const ModeDims& d) { return d.p <= kMaxFusedDim && d.q <= kMaxFusedDim; }

struct GroupShape {
  long long s_in = 1, s_out = 1, s_max = 1;
  int rn = 8, nbuf = 2, csp = 1;
  long long factor_elems = 0, scratch_elems = 0;
  std::size_t fixed_bytes = 0, chunk_bytes = 0;
};

GroupShape group_shape(const std::vector<ModeDims>& modes, int first, int last, DType dtype, bool backward) {
  GroupShape g;
  long long widest = 1;
  for (int k = first; k <= last; ++k) {
    g.s_in *= modes[k].p;
    g.s_out *= modes[k].q;
    widest = std::max(widest, backward ? std::max(modes[k].p, modes[k].q) : modes[k].q);
  }
  // States visited by the forward steps (last mode first); the backward's gradients have the
  // same sizes.
  long long s = g.s_in;
  g.s_max = s;
  for (int k = last; k >= first; --k) {
    s = s / modes[k].p * modes[k].q;
    g.s_max = std::max(g.s_max, s);
  }
  g.rn = widest <= 4 ? 4 : 8;
  g.nbuf = backward ? (last - first + 1) + 2 : 2;
  g.csp = chunk_stride(g.s_max);
  for (int k = first; k <= last; ++k) {
    g.factor_elems += round_up(modes[k].p, g.rn) * round_up(modes[k].q, g.rn);
    if (backward)
      g.scratch_elems = std::max<long long>(
          g.scratch_elems, grad_scratch_elems(int(modes[k].p), int(modes[k].q), kThreads));
  }
  const std::size_t as = acc_size(dtype);
  g.fixed_bytes = static_cast<std::size_t>(g.factor_elems + g.scratch_elems) * as;
  g.chunk_bytes = static_cast<std::size_t>(g.nbuf) * g.csp * as;
  return g;
}

bool group_fits(const GroupShape& g, const Limits& lim) {
  return g.s_max <= (1 << 24) && g.fixed_bytes + g.chunk_bytes <= lim.smem_budget;
}

}  // namespace

Plan make_plan(long long M, const std::vector<ModeDims>& modes, DType dtype, const Limits& lim,
               bool backward) {
  Plan plan;
  plan.backward = backward;
  plan.M = M;
  const int n = static_cast<int>(modes.size());
  const std::size_t es = dtype_size(dtype), as = acc_size(dtype);

  // Group the modes, last to first.
  for (int k = n - 1; k >= 0;) {
    Segment seg;
    if (n == 1 || !fusable(modes[k]) || !group_fits(group_shape(modes, k, k, dtype, backward), lim)) {
      seg.kind = SegKind::gemm;
      seg.first = k;
      seg.count = 1;
      --k;
    } else {
      int first = k;
      while (first - 1 >= 0 && fusable(modes[first - 1]) && k - first + 2 <= kMaxFused &&
             group_fits(group_shape(modes, first - 1, k, dtype, backward), lim))
        --first;
      seg.kind = SegKind::fused;
      seg.first = first;
      seg.count = k - first + 1;
      k = first - 1;
    }
    plan.segs.push_back(seg);
  }

  // Sizes: the outer index L of a group is Π q of the modes after it (already applied) times Π p
  // of the modes before it (not yet applied).
  plan.state.assign(plan.segs.size() + 1, 0);
  long long state = 1;
  for (const ModeDims& d : modes) state *= d.p;
  plan.state[0] = state;
  for (std::size_t s = 0; s < plan.segs.size(); ++s) {
    Segment& seg = plan.segs[s];
    seg.s_in = seg.s_out = 1;
    for (int k = seg.first; k < seg.first + seg.count; ++k) {
      seg.s_in *= modes[k].p;
      seg.s_out *= modes[k].q;
    }
    seg.L = state / seg.s_in;
    state = seg.L * seg.s_out;
    plan.state[s + 1] = state;

    if (seg.kind == SegKind::gemm) {
      const ModeDims& d = modes[seg.first];
      // Partial products of ∂ℓ/∂F: at most 64 MiB of them per cuBLAS call.
      const long long per = d.p * d.q * static_cast<long long>(as);
      seg.gemm_chunk = seg.L == 1 ? 1 : std::clamp<long long>((64LL << 20) / per, 1, std::max<long long>(M, 1));
      continue;
    }
    const GroupShape g = group_shape(modes, seg.first, seg.first + seg.count - 1, dtype, backward);
    seg.s_max = g.s_max;
    seg.rn = g.rn;
    seg.nbuf = g.nbuf;
    seg.csp = g.csp;
    const long long c_smem = static_cast<long long>((lim.smem_budget - g.fixed_bytes) / g.chunk_bytes);
    const long long c_target = std::max<long long>(1, 8192 / g.s_max);
    const double chunks = static_cast<double>(std::max<long long>(M, 1)) * static_cast<double>(seg.L);
    const long long c_grid = static_cast<long long>(std::max(1.0, std::min(chunks / (2.0 * lim.num_sms), 1e9)));
    const long long C = std::max<long long>(1, std::min({c_smem, c_target, c_grid}));
    long long tl, tm;
    if (seg.L >= C) {
      const long long ntl = (seg.L + C - 1) / C;  // balanced: no mostly-empty last tile
      tl = (seg.L + ntl - 1) / ntl;
      tm = 1;
    } else {
      tl = seg.L;
      tm = std::max<long long>(1, C / seg.L);
    }
    seg.tl = static_cast<int>(tl);
    seg.tm = static_cast<int>(tm);
    seg.tiles_l = (seg.L + tl - 1) / tl;
    seg.ntiles = (M + tm - 1) / tm * seg.tiles_l;
    seg.off_buf = static_cast<int>(g.factor_elems);
    seg.off_scratch = static_cast<int>(g.factor_elems + static_cast<long long>(g.nbuf) * tm * tl * g.csp);
    seg.smem = static_cast<std::size_t>(seg.off_scratch + g.scratch_elems) * as;
    seg.part_stride = 0;
    for (int k = seg.first; k < seg.first + seg.count; ++k)
      seg.part_stride += static_cast<int>(modes[k].p * modes[k].q);
    if (backward) {
      // Persistent grid: every block keeps one partial ∂ℓ/∂F sum, so launch only as many blocks as
      // are resident at once (register use caps residency at two 256-thread blocks per SM).
      const long long per_sm = std::clamp<long long>(
          static_cast<long long>(lim.smem_per_sm / (seg.smem + 1024)), 1, 2);
      seg.grid = std::min<long long>(seg.ntiles, per_sm * lim.num_sms);
    } else {
      seg.grid = std::min<long long>(seg.ntiles, 1LL << 30);
    }
  }

  // Workspace.
  const std::size_t M_ = static_cast<std::size_t>(std::max<long long>(M, 0));
  const std::size_t NS = plan.segs.size();
  long long widest_mid = 0;  // largest intermediate state (between groups)
  for (std::size_t s = 1; s < NS; ++s) widest_mid = std::max(widest_mid, plan.state[s]);
  const std::size_t mid_bytes = align_up(M_ * static_cast<std::size_t>(widest_mid) * es);
  std::size_t cur = 0;
  if (!backward) {
    if (NS >= 2) { plan.off_ping = cur; cur += mid_bytes; }
    if (NS >= 3) { plan.off_pong = cur; cur += mid_bytes; }
  } else {
    plan.off_saved.assign(NS, 0);
    for (std::size_t s = 1; s < NS; ++s) {
      plan.off_saved[s] = cur;
      cur += align_up(M_ * static_cast<std::size_t>(plan.state[s]) * es);
    }
    if (NS >= 2) {
      plan.off_grad[0] = cur; cur += mid_bytes;
      plan.off_grad[1] = cur; cur += mid_bytes;
    }
    std::size_t partial = 0, accum = 0;
    for (const Segment& seg : plan.segs) {
      if (seg.kind == SegKind::fused) {
        partial = std::max(partial, static_cast<std::size_t>(seg.grid) * seg.part_stride * as);
      } else {
        const ModeDims& d = modes[seg.first];
        partial = std::max(partial, static_cast<std::size_t>(seg.gemm_chunk * d.p * d.q) * as);
        accum = std::max(accum, static_cast<std::size_t>(d.p * d.q) * as);
      }
    }
    plan.off_partial = cur; cur += align_up(partial);
    plan.off_acc = cur; cur += align_up(accum);
  }
  plan.ws_bytes = cur;
  return plan;
}

}  // namespace sparsekern::kron::detail
