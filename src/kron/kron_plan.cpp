// Execution planning of Kronecker products: which modes fuse into one kernel, the tile of each fused
// kernel, and the workspace layout. Host code shared by the CPU and CUDA backends (the CPU backend
// plans for a virtual GPU so that its tests exercise the same groups and tiles).
//
// Tile table (how each kernel is shaped, and why):
//   factor p or q > 64        → one mode per cuBLAS strided-batched GEMM (kMaxFusedDim: such a
//                               factor would fill most of a block's shared memory, and cuBLAS is
//                               efficient at that size)
//   single factor (n = 1)     → one plain cuBLAS GEMM: X·F is exactly a GEMM, cuBLAS's is tuned
//   otherwise                 → fused groups of consecutive modes whose largest chunk state fits
//                               the shared-memory budget; among the groupings that fit, the one
//                               with the least estimated memory traffic (choose_groups)
//   register tile             → 4 rows × 8 columns per thread; 4 columns when every q (and p in
//                               the backward) is ≤ 4, where an 8-wide tile would be mostly padding
//   shared-memory padding     → one slot per 32 elements; per 64 when every p is 64 (see swz)
//   chunks per block C        → as many as the budget allows, up to ~8192 elements per buffer
//                               (32 KB of fp32: enough rows for all 8 warps' tiles, and two
//                               blocks per SM), and no more than leaves ≥ 2 tiles per SM
//   tile shape (tm × tl)      → tl consecutive outer indices first (the output of a chunk is
//                               strided by L; neighbouring l make the stores contiguous), rows after
//   backward grid             → persistent, two blocks per SM: each block keeps one partial ∂ℓ/∂F
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
int chunk_stride(long long s_max, int sh) { return static_cast<int>((s_max + ((s_max - 1) >> sh)) | 1); }

bool fusable(const ModeDims& d) { return d.p <= kMaxFusedDim && d.q <= kMaxFusedDim; }

struct GroupShape {
  long long s_in = 1, s_out = 1, s_max = 1;
  int rn = 8, nbuf = 2, csp = 1, sh = 5;
  long long factor_elems = 0, scratch_elems = 0;
  std::size_t fixed_bytes = 0, chunk_bytes = 0;
};

GroupShape group_shape(const std::vector<ModeDims>& modes, int first, int last, DType dtype, bool backward) {
  GroupShape g;
  long long widest = 1, narrowest = kMaxFusedDim;
  for (int k = first; k <= last; ++k) {
    narrowest = std::min(narrowest, modes[k].p);
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
  // Padding every 64 elements when every row length p is 64 (a 64-stride walk would conflict
  // 2-way with one pad per 32), else every 32 (conflict-free for p = 8, 16, 32).
  g.sh = narrowest >= 64 ? 6 : 5;
  g.csp = chunk_stride(g.s_max, g.sh);
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


long long outer_size(const std::vector<ModeDims>& modes, int first, int last) {
  long long L = 1;
  for (int k = 0; k < first; ++k) L *= modes[k].p;
  for (int k = last + 1; k < static_cast<int>(modes.size()); ++k) L *= modes[k].q;
  return L;
}

struct TileChoice {
  long long tm = 1, tl = 1;
};

/// Chunks per block and their shape (see the tile table at the top of this file).
TileChoice choose_tile(const GroupShape& g, long long M, long long L, const Limits& lim) {
  const long long c_smem = static_cast<long long>((lim.smem_budget - g.fixed_bytes) / g.chunk_bytes);
  const long long c_target = std::max<long long>(1, 8192 / g.s_max);
  const double chunks = static_cast<double>(std::max<long long>(M, 1)) * static_cast<double>(L);
  const long long c_grid = static_cast<long long>(std::max(1.0, std::min(chunks / (2.0 * lim.num_sms), 1e9)));
  const long long C = std::max<long long>(1, std::min({c_smem, c_target, c_grid}));
  TileChoice t;
  if (L >= C) {
    const long long ntl = (L + C - 1) / C;  // balanced: no mostly-empty last tile
    t.tl = (L + ntl - 1) / ntl;
    t.tm = 1;
  } else {
    t.tl = L;
    t.tm = std::max<long long>(1, C / L);
  }
  return t;
}

/// The groups (in mode order) with the least estimated memory traffic; see make_plan.
std::vector<Segment> choose_groups(long long M, const std::vector<ModeDims>& modes, DType dtype,
                                   const Limits& lim, bool backward) {
  const int n = static_cast<int>(modes.size());
  const double es = static_cast<double>(dtype_size(dtype));
  const double rows = static_cast<double>(std::max<long long>(M, 1));
  // A kernel boundary costs about a microsecond of launch and ramp-up: ~4 MB of traffic.
  constexpr double kLaunchBytes = 4.0 * (1 << 20);
  constexpr double kInf = 1e300;
  std::vector<double> best(static_cast<std::size_t>(n) + 1, kInf);
  std::vector<int> cut(static_cast<std::size_t>(n) + 1, 0);
  best[0] = 0;
  for (int j = 1; j <= n; ++j) {  // best grouping of modes [0, j)
    for (int i = j - 1; i >= 0 && j - i <= kMaxFused; --i) {  // last group: modes [i, j)
      const int first = i, last = j - 1;
      const long long L = outer_size(modes, first, last);
      double cost;
      bool all_fusable = n > 1;
      for (int k = first; k <= last; ++k) all_fusable = all_fusable && fusable(modes[k]);
      if (all_fusable) {
        const GroupShape g = group_shape(modes, first, last, dtype, backward);
        if (!group_fits(g, lim)) break;  // larger groups only grow
        const TileChoice t = choose_tile(g, M, L, lim);
        const double run = static_cast<double>(t.tl) * es;  // bytes per store run when L > 1
        const double amp = L > 1 && run < 32.0 ? 32.0 / run : 1.0;
        cost = rows * static_cast<double>(L) * es *
               (static_cast<double>(g.s_in) + static_cast<double>(g.s_out) * amp);
      } else if (j - i == 1) {  // one mode through cuBLAS
        cost = rows * static_cast<double>(L) * es * static_cast<double>(modes[first].p + modes[first].q);
      } else {
        break;
      }
      cost += kLaunchBytes + best[i];
      if (cost < best[j]) {
        best[j] = cost;
        cut[j] = i;
      }
    }
  }
  std::vector<Segment> groups;
  for (int j = n; j > 0; j = cut[j]) {
    Segment seg;
    seg.first = cut[j];
    seg.count = j - cut[j];
    bool all_fusable = n > 1;
    for (int k = seg.first; k < j; ++k) all_fusable = all_fusable && fusable(modes[k]);
    seg.kind = all_fusable ? SegKind::fused : SegKind::gemm;
    groups.push_back(seg);
  }
  std::reverse(groups.begin(), groups.end());
  return groups;
}

}  // namespace

Plan make_plan(long long M, const std::vector<ModeDims>& modes, DType dtype, const Limits& lim,
               bool backward) {
  Plan plan;
  plan.backward = backward;
  plan.M = M;
  const int n = static_cast<int>(modes.size());
  const std::size_t es = dtype_size(dtype), as = acc_size(dtype);

  // Group the modes. Every grouping does the same arithmetic (modes always apply last to first),
  // so groupings differ in memory traffic: each group reads and writes the whole state once, and a
  // group whose tile spans fewer than 32 bytes of consecutive outer indices stores partial sectors.
  // A dynamic program over the cut points picks the grouping with the least estimated traffic.
  const std::vector<Segment> groups = choose_groups(M, modes, dtype, lim, backward);
  plan.segs.assign(groups.rbegin(), groups.rend());  // execution order: last mode first

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
      // Partial products of ∂ℓ/∂F per cuBLAS call: at most 64 MiB of them (bounds the workspace
      // while keeping each batched call large enough to fill the GPU).
      const long long per = d.p * d.q * static_cast<long long>(as);
      seg.gemm_chunk = seg.L == 1 ? 1 : std::clamp<long long>((64LL << 20) / per, 1, std::max<long long>(M, 1));
      continue;
    }
    const GroupShape g = group_shape(modes, seg.first, seg.first + seg.count - 1, dtype, backward);
    seg.s_max = g.s_max;
    seg.rn = g.rn;
    seg.nbuf = g.nbuf;
    seg.csp = g.csp;
    seg.sh = g.sh;
    const TileChoice tc = choose_tile(g, M, seg.L, lim);
    const long long tl = tc.tl, tm = tc.tm;
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
