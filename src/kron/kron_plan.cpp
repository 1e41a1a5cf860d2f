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
//
// fp32 forward of a product whose modes all fuse into one group (L = 1), with every q a multiple
// of 4 and some p ≥ 32 (the register-tile kernel of kron_fast.h; SPARSEKERN_KRON_FWD=new takes it
// for every p, =old never; see plan_fast for the measurements behind the p ≥ 32 rule):
//   register tile             → 8 × 8 per thread when the tiles that fill 8 warps give every SM at
//                               least one (≥ 4 FFMAs per loaded register: FFMA-bound);
//                               else 4 × 4 (a quarter of the rows per tile, so that small products
//                               such as 1024 × (32 ⊗ 32) still spread over all SMs)
//   threads                   → 256 (8 warps); 128 (two blocks per SM, half the rows each) when
//                               every p ≤ 16 and that still gives each block a tile: short K loops
//                               make the in-place write-backs as costly as the arithmetic, and a
//                               second block overlaps them (e.g. 1024 × (16 ⊗ 16 ⊗ 16), (8⊗8⊗8⊗8));
//                               with larger p, where that gives each block ≥ 6 tiles (4096 ×
//                               (64 ⊗ 64): 5% faster; measured slower with under 2 per block)
//   rows per tile             → the most whose every step fits one tile per thread (the in-place
//                               scheme: outputs of a step ≤ 256 × tile²), at most M
//   X buffers                 → two (the next tile's copy overlaps this one's arithmetic) when
//                               they fit the opt-in shared memory, else one (the copy overlaps the
//                               steps after the last mode); rows per tile halve while neither fits
//   grid                      → persistent: one block per SM for 8 × 8 tiles (up to 255
//                               registers), up to two for 4 × 4 and for 128-thread 8 × 8
//
// fp32 forward of one group over every mode with square factors, every p ∈ {4, 8, 16, 32} and
// 1024 ≤ N = Π p ≤ 8192 (the fiber-per-thread kernel of kron_small.h; SPARSEKERN_KRON_FWD=auto and
// =small take it, =new and =old never): a thread owns 32 elements of a row per mode, so
//   which products (auto)      → every p ≤ 16 (with p = 32 the register-tile kernel measured faster)
//   rows per tile              → threads · 32 / N (a 4096-wide row: 1 row per 128-thread tile)
//   threads                    → 128 (four blocks per SM, ≤ 128 registers) where N ≤ 4096, else
//                                256 (two per SM): more independent blocks measured faster
//   X buffers                  → two: the next tile's copy runs during this tile's passes
//   grid                       → persistent, as many blocks as are resident at once
//
// fp32 backward of two factors with every side a multiple of 4 and ≤ 64 (the register-tile backward
// of kron_fast_bwd.h; SPARSEKERN_KRON_BWD_KERNEL=old never; one group whatever choose_groups says):
//   register tile             → 4 × 4 (8 × 8 measured 1.4-1.8x slower: at the rows that fit, most
//                               threads would hold no tile), 8 × 8 only where one row has more
//                               outputs than 256 × 16
//   rows per tile             → ⌈M / (2 × SMs)⌉ (every block of a two-per-SM grid gets a tile; more
//                               rows per tile measured faster than more tiles per block), capped
//                               by the 4 × 4 tiles of 256 threads and by shared memory
//   blocks per SM, stages     → two per SM where they fit (half the SM's shared memory), else one;
//                               at each the most rows, two input stages before one at equal rows
//   kept T0                   → planned separately (fewer buffers, G1 over the stage's copies of
//                               ∂ℓ/∂Y): with (32 ⊗ 32) and (64 ⊗ 64) it fits two blocks per SM
//
// fp32 backward of the small-factor forward's products (the fiber-per-thread backward of
// kron_small_bwd.h; SPARSEKERN_KRON_BWD_KERNEL=auto (the default) and =small, =new and =old never):
//   which products (auto)       → three or more factors (H100, µs, against the generic fused
//                                 backward: 1024 × (8⊗8⊗8⊗8) 85 vs 190, (16⊗16⊗16) 105 vs 134,
//                                 (4⊗4⊗4⊗4⊗4) 38 vs 69, 256 × (16⊗16⊗32) 72 vs 127); two factors
//                                 ((32⊗32), the only pair in scope) stay with the register-tile
//                                 backward (1024 rows: 32 vs 41)
//   threads, rows per tile      → as the small-factor forward's
//   shared memory               → both factor copies and n + 1 tiles (X, ∂ℓ/∂Y, n − 1 states; the
//                                 next tile loads into the first two states that die; two modes
//                                 add a spare tile): 8⊗8⊗8⊗8 five 16 KB tiles, two blocks per SM;
//                                 "small:lean=1" (n ≥ 3, opt-in, measured slower): n tiles, X
//                                 read again from global memory for mode 0's contraction
//                                 (8⊗8⊗8⊗8: three blocks per SM; 16⊗16⊗16: four)
//   grid                        → persistent, as many blocks as are resident at once, one fewer
//                                 per SM where three fit and the tiles are few (below 8.5 per
//                                 SM: 1024 × (16⊗16⊗16) 69.0 → 62.4 µs; kSmallBwdFewTiles2)
//
// fp32 products that no single kernel above takes but whose modes 1 … n−1 one does (the
// natural-order split, plan_natural_tail; X's rows, and ∂ℓ/∂X's in the
// backward, dense; never under "old"):
//   forward                     → that kernel over X as M · p₀ rows of Π_{k≥1} p (its own layout,
//                                 no transpose), then mode 0 as one strided-batched GEMM (F₀ᵀ times
//                                 each row's p₀ × Π_{k≥1} q block)
//                                 (H100, device µs, against the generic groups: 256 × (16⊗16⊗16⊗16)
//                                 149 vs 224, 128 × (32⊗32⊗32) 45 vs 64, 64 × (8⊗8⊗8⊗8⊗8) 23 vs 42,
//                                 16 × (16⊗16⊗16⊗16) 14 vs 31)
//   backward                    → the recompute of the tail's output, the head's GEMMs (∂ℓ/∂F₀ and
//                                 the pulled-back gradient), then the small-factor or register-tile
//                                 backward over the M · p₀ rows (256 × (16⊗16⊗16⊗16) 473 vs 1082,
//                                 128 × (32⊗32⊗32) 180 vs 303 generic and 237 step-wise)
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>

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

int pow2_at_least(long long v) {
  int r = 1;
  while (r < v) r *= 2;
  return r;
}

/// Whether the register-tile forward takes a product with these modes (one group, fp32 checked by
/// the caller): 2 … kMaxFused modes, p, q ≤ 64, q a multiple of 4 (16-byte vectors of outputs).
bool fast_eligible(const std::vector<ModeDims>& modes) {
  const int n = static_cast<int>(modes.size());
  if (n < 2 || n > kMaxFused) return false;
  for (const ModeDims& d : modes)
    if (d.p > kMaxFusedDim || d.q > kMaxFusedDim || d.q % 4 != 0) return false;
  return true;
}

/// The forward kernel selection (see kron::set_forward_kernel): kernel −1 = not read yet, 0 = old,
/// 1 = new (the register-tile kernel wherever eligible), 2 = auto (the default: the small-factor
/// kernel where eligible, else new where it measured faster), 3 = small (the small-factor kernel
/// where eligible, else as auto); tile, rows, stages: measurement overrides of the register-tile
/// plan, threads and grid of either plan (0 = the planner's).
struct FwdSelect {
  int kernel = -1, tile = 0, rows = 0, stages = 0, threads = 0, grid = 0;
  int lean = 0;  ///< small-factor backward: the lean buffer pool (SmallBwdArgs::lean), opt-in
};

std::mutex g_select_mutex;
FwdSelect g_select;
/// Bumped by every set_forward_kernel / set_backward_kernel (see kron::selection_epoch).
std::atomic<std::uint64_t> g_select_epoch{1};

/// Parses "old", "new" or "new:tile=T,rows=R,stages=S,threads=N,grid=G" (any subset, any order).
FwdSelect parse_forward_kernel(const std::string& v, const char* where) {
  auto bad = [&]() {
    return InvalidArgument(sparsekern::detail::concat(
        where, " must be \"auto\", \"old\", \"new\", \"small\", \"new:tile=8|4,rows=N,stages=1|2,threads=256|128,grid=N\" "
        "or \"small:threads=256|128,grid=N,lean=0|1\"; got \"",
        v, "\""));
  };
  FwdSelect sel;
  if (v.empty() || v == "auto") {
    sel.kernel = 2;
    return sel;
  }
  if (v == "new") {
    sel.kernel = 1;
    return sel;
  }
  if (v == "old") {
    sel.kernel = 0;
    return sel;
  }
  if (v == "small") {
    sel.kernel = 3;
    return sel;
  }
  const bool small = v.compare(0, 6, "small:") == 0;
  if (!small && v.compare(0, 4, "new:") != 0) throw bad();
  sel.kernel = small ? 3 : 1;
  std::size_t pos = small ? 6 : 4;
  while (pos < v.size()) {
    std::size_t end = v.find(',', pos);
    if (end == std::string::npos) end = v.size();
    const std::string item = v.substr(pos, end - pos);
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos) throw bad();
    const std::string key = item.substr(0, eq), val = item.substr(eq + 1);
    char* stop = nullptr;
    const long num = std::strtol(val.c_str(), &stop, 10);
    if (val.empty() || *stop != '\0' || num < (key == "lean" ? 0 : 1) || num > (1 << 20)) throw bad();
    if (small && key != "threads" && key != "grid" && key != "lean") throw bad();
    if (key == "tile" && (num == 4 || num == 8))
      sel.tile = static_cast<int>(num);
    else if (key == "rows")
      sel.rows = static_cast<int>(num);
    else if (key == "stages" && num <= 2)
      sel.stages = static_cast<int>(num);
    else if (key == "threads" && (num == 128 || num == 256))
      sel.threads = static_cast<int>(num);
    else if (key == "grid")
      sel.grid = static_cast<int>(num);
    else if (key == "lean" && small && num <= 1)
      sel.lean = static_cast<int>(num);
    else
      throw bad();
    pos = end + 1;
  }
  return sel;
}

/// `sel`, read from the environment variable `env` when not read yet (kernel < 0).
FwdSelect read_select(FwdSelect& sel, const char* env) {
  std::lock_guard<std::mutex> lock(g_select_mutex);
  if (sel.kernel < 0) {
    const char* v = std::getenv(env);
    sel = parse_forward_kernel(v != nullptr ? v : "", env);
  }
  return sel;
}

FwdSelect forward_select() { return read_select(g_select, "SPARSEKERN_KRON_FWD"); }

/// The fused backward kernel selection (see kron::set_backward_kernel), same syntax as the forward's;
/// "auto" and "new" both take the register-tile backward wherever it is eligible.
FwdSelect g_bwd_select;

FwdSelect backward_select() { return read_select(g_bwd_select, "SPARSEKERN_KRON_BWD_KERNEL"); }

/// A selection in the syntax parse_forward_kernel reads.
std::string select_name(const FwdSelect& sel) {
  if (sel.kernel == 0) return "old";
  if (sel.kernel == 2) return "auto";
  std::string s = sel.kernel == 3 ? "small:" : "new:";
  if (sel.tile != 0) s += "tile=" + std::to_string(sel.tile) + ",";
  if (sel.rows != 0) s += "rows=" + std::to_string(sel.rows) + ",";
  if (sel.stages != 0) s += "stages=" + std::to_string(sel.stages) + ",";
  if (sel.threads != 0) s += "threads=" + std::to_string(sel.threads) + ",";
  if (sel.grid != 0) s += "grid=" + std::to_string(sel.grid) + ",";
  if (sel.lean != 0) s += "lean=" + std::to_string(sel.lean) + ",";
  s.pop_back();  // the last ',' (or the ':' of a plain "new" / "small")
  return s;
}

/// Whether the two-factor register-tile backward (kron_fast_bwd.h) takes these modes (fp32 and one
/// group checked by the caller): p, q ≤ 64 and multiples of 4 (16-byte vectors along every index).
bool fast_bwd_eligible(const std::vector<ModeDims>& modes) {
  if (modes.size() != 2) return false;
  for (const ModeDims& d : modes)
    if (d.p > kMaxFusedDim || d.q > kMaxFusedDim || d.p % 4 != 0 || d.q % 4 != 0) return false;
  return true;
}

/// Most outputs of one of its three steps per tile of `chunks` rows (each must fit 256 threads'
/// register tiles).
long long fast_bwd_step_outputs(const std::vector<ModeDims>& modes, long long chunks) {
  const long long p0 = modes[0].p, q0 = modes[0].q, p1 = modes[1].p, q1 = modes[1].q;
  auto wide = [](long long v) { return std::max<long long>(8, pow2_at_least(static_cast<int>(v))); };
  return chunks * std::max({wide(q1) * p0, wide(p0) * q1, wide(p1) * p0});
}

/// Rows per tile and stages of the register-tile backward (recompute or `kept`), or chunks = 0 when
/// nothing fits: the first layout within half an SM's shared memory (two blocks per SM), else
/// within a block's limit; within a budget the most rows, two stages before one at equal rows.
struct FastBwdPick {
  int chunks = 0, nstage = 1, tile = 4;
  std::size_t smem = 0;
  long long ntiles = 0, grid = 0;
};

FastBwdPick pick_fast_bwd(const std::vector<ModeDims>& modes, long long M, const Limits& lim, const FwdSelect& sel,
                          bool kept) {
  FastBwdPick pick;
  // Rows per tile: as many as leave every block of a two-per-SM grid a tile (more rows per tile
  // measured faster than more tiles per block: 4096 × (32 ⊗ 32) 63 µs at 4 rows, one stage,
  // against 84 µs at 2 rows, two stages; 1024 × (32 ⊗ 32) 28 µs, one tile per block at 3 rows).
  // 4 × 4 register tiles (8 × 8 measured slower on every shape: 1.4-1.8x on an H200, most threads
  // idle at these rows per tile), so at most 256 × 16 outputs per step unless one row alone has
  // more ("new:tile=8" lifts the cap to 256 × 64, for measurements).
  const long long cap = kThreads * (sel.tile == 8 ? 64LL : 16LL);
  long long most = std::max<long long>(1, (M + 2LL * lim.num_sms - 1) / (2LL * lim.num_sms));
  while (most > 1 && fast_bwd_step_outputs(modes, most) > cap) --most;
  if (sel.rows > 0) most = std::min<long long>(most, sel.rows);
  most = std::min(most, M);
  if (fast_bwd_step_outputs(modes, most) > kThreads * 64LL) return pick;
  // Two blocks per SM where they fit (16 warps hide more latency: 1024 × (32 ⊗ 32) 28-29 µs at
  // two per SM, 31 µs at one on an H200), else one; at each, the most rows, two stages before one
  // at equal rows.
  const std::size_t half = std::min(lim.smem_block_max, lim.smem_per_sm / 2 - 1024);
  for (const std::size_t budget : {half, lim.smem_block_max}) {
    for (long long chunks = most; chunks >= 1; --chunks) {
      for (int nstage = sel.stages == 1 ? 1 : 2; nstage >= 1; --nstage) {
        FastBwdArgs a;
        const std::size_t smem = fast_bwd_layout(modes, static_cast<int>(chunks), nstage, kept, a);
        if (smem > budget) continue;
        pick.chunks = static_cast<int>(chunks);
        pick.nstage = nstage;
        pick.smem = smem;
        pick.tile = fast_bwd_step_outputs(modes, chunks) > kThreads * 16LL || sel.tile == 8 ? 8 : 4;
        pick.ntiles = (M + chunks - 1) / chunks;
        // 8 × 8 tiles: one block per SM (__launch_bounds__(256, 1)); 4 × 4: up to two.
        const long long per_sm = std::clamp<long long>(static_cast<long long>(lim.smem_per_sm / (smem + 1024)), 1,
                                                       pick.tile == 8 ? 1 : 2);
        pick.grid = std::min<long long>(pick.ntiles, per_sm * lim.num_sms);
        if (sel.grid > 0) pick.grid = std::min<long long>(pick.grid, sel.grid);
        return pick;
      }
    }
  }
  return pick;
}

/// Fills seg's fast_* (recompute) and kept_* fields for the register-tile backward when it fits;
/// false otherwise.
bool plan_fast_bwd(const std::vector<ModeDims>& modes, long long M, const Limits& lim, const FwdSelect& sel,
                   Segment& seg) {
  if (!fast_bwd_eligible(modes) || M < 1 || lim.smem_block_max == 0) return false;
  const FastBwdPick re = pick_fast_bwd(modes, M, lim, sel, false);
  const FastBwdPick ke = pick_fast_bwd(modes, M, lim, sel, true);
  if (re.chunks == 0 || ke.chunks == 0) return false;
  seg.fast = true;
  seg.fast_tile = re.tile;
  seg.fast_threads = kThreads;
  seg.fast_chunks = re.chunks;
  seg.fast_nstage = re.nstage;
  seg.smem = re.smem;
  seg.tm = re.chunks;
  seg.tl = 1;
  seg.tiles_l = 1;
  seg.ntiles = re.ntiles;
  seg.grid = re.grid;
  seg.kept_tile = ke.tile;
  seg.kept_chunks = ke.chunks;
  seg.kept_nstage = ke.nstage;
  seg.kept_smem = ke.smem;
  seg.kept_ntiles = ke.ntiles;
  seg.kept_grid = ke.grid;
  return true;
}

/// Fills seg's fast_* fields and tile when the register-tile forward fits; false otherwise.
bool plan_fast(const std::vector<ModeDims>& modes, long long M, const Limits& lim, const FwdSelect& sel,
               Segment& seg) {
  if (!fast_eligible(modes) || M < 1 || lim.smem_block_max == 0) return false;
  const FastLayout per = fast_layout(modes, 0, 1);
  if (per.out_per_chunk <= 0) return false;
  long long max_p = 1;
  for (const ModeDims& d : modes) max_p = std::max(max_p, d.p);
  // auto: the register-tile kernel only where some p ≥ 32. Where every p ≤ 16 it measured slower
  // than the chunked kernel on an H200 (kernel time, fp32: 1024 × (16⊗16⊗16) 32.1 vs 29.9 µs,
  // 1024 × (8⊗8⊗8⊗8) 38.5 vs 29.9 µs, no plan override faster), while with p = 32 / 64 it won
  // (1024 × (32⊗32) 10.0 vs 17.5, 1024 × (64⊗64) 42.0 vs 58.0, 4096 × (64⊗64) 157 vs 242 µs).
  if ((sel.kernel == 2 || sel.kernel == 3) && max_p <= 16) return false;
  struct Choice {
    bool ok = false;
    int tile = 8, threads = kThreads, chunks = 1, nstage = 1;
    std::size_t smem = 0;
    long long ntiles = 0, per_sm = 1;
  };
  // (8, 256): one block per SM with up to 255 registers; (8, 128) and (4, 256): two blocks per SM,
  // each with half of the SM's shared memory.
  auto choose = [&](int tile, int threads) {
    Choice c;
    c.tile = tile;
    c.threads = threads;
    c.per_sm = tile == 8 && threads == 256 ? 1 : 2;
    const long long cap = static_cast<long long>(threads) * tile * tile;
    long long chunks = std::min<long long>(cap / per.out_per_chunk, M);
    if (sel.rows > 0) chunks = std::min<long long>(chunks, sel.rows);
    const std::size_t budget =
        c.per_sm == 1 ? lim.smem_block_max : std::min(lim.smem_block_max, lim.smem_per_sm / 2 - 1024);
    for (; chunks >= 1; chunks /= 2) {
      for (int nstage = sel.stages == 1 ? 1 : 2; nstage >= 1; --nstage) {
        const FastLayout lay = fast_layout(modes, static_cast<int>(chunks), nstage);
        if (lay.smem <= budget) {
          c.ok = true;
          c.chunks = static_cast<int>(chunks);
          c.nstage = nstage;
          c.smem = lay.smem;
          c.ntiles = (M + chunks - 1) / chunks;
          return c;
        }
      }
    }
    return c;
  };
  Choice pick;
  if (sel.tile != 0 || sel.threads != 0) {
    const int tile = sel.tile != 0 ? sel.tile : 8;
    pick = choose(tile, tile == 4 ? kThreads : (sel.threads != 0 ? sel.threads : kThreads));
  } else {
    pick = choose(8, kThreads);
    if (!pick.ok || pick.ntiles < lim.num_sms) {
      const Choice small = choose(4, kThreads);
      if (small.ok) pick = small;
    } else if (max_p <= 16) {
      // Short K loops: a step's write-back (16 STS.128 per thread, no arithmetic beside it in a
      // lone block) costs about as many shared-memory clocks as its FFMAs; two 128-thread blocks
      // per SM overlap one's write-backs with the other's arithmetic, on tiles of half the rows.
      const Choice half = choose(8, 128);
      if (half.ok && half.ntiles >= 2LL * lim.num_sms) pick = half;
    } else {
      // Some p ≥ 32: two 128-thread blocks per SM also win once every block gets many tiles
      // (H200, fp32, device time of (64⊗64): 4096 rows 142.7 vs 149.5 µs, 8192 rows 269.4 vs
      // 291.0; even at 2048 rows, 76.8 vs 77.4, with 1024 tiles of 2 rows; slower at 1024 rows,
      // 40.3 vs 38.5; tools/diag/kron_fwd_sweep.py, session 14), where the other block's
      // arithmetic covers one block's barriers and write-backs.
      const Choice half = choose(8, 128);
      if (half.ok && half.ntiles >= 12LL * lim.num_sms) pick = half;
    }
  }
  if (!pick.ok) return false;
  seg.fast = true;
  seg.fast_tile = pick.tile;
  seg.fast_threads = pick.threads;
  seg.fast_chunks = pick.chunks;
  seg.fast_nstage = pick.nstage;
  seg.smem = pick.smem;
  seg.tm = pick.chunks;
  seg.tl = 1;
  seg.tiles_l = 1;
  seg.ntiles = pick.ntiles;
  const long long per_sm =
      std::clamp<long long>(static_cast<long long>(lim.smem_per_sm / (pick.smem + 1024)), 1, pick.per_sm);
  seg.grid = std::min<long long>(pick.ntiles, per_sm * lim.num_sms);
  if (sel.grid > 0) seg.grid = std::min<long long>(seg.grid, sel.grid);  // tests: several tiles per block
  return true;
}

/// The small-factor backward takes one block fewer per SM (where three or more fit) below
/// kSmallBwdFewTiles2 / 2 = 8.5 tiles per SM. Three blocks with few tiles each finish unevenly (at
/// 1024 rows of 16⊗16⊗16, one row per tile, 232 of 396 blocks have three tiles and 164 two); two
/// blocks with more tiles each measured faster until about nine tiles per SM, where three even
/// blocks win. H200, device µs, three blocks per SM → two (session 33 by grid caps, session 34 by
/// this rule against the previous plan): 16⊗16⊗16 512 rows 41.5 → 35.7, 768 51.7 → 49.4, 1024
/// 69.0 → 62.4 (7.8 tiles per SM), but 1188 71.0 → 72.9 (9 per SM: three tiles for every block),
/// 2048 112 → 114, 4096 206 → 217; 1024 × (8⊗16⊗16) 38.9 → 34.2, (16⊗16⊗8) 42.5 → 37.2.
constexpr long long kSmallBwdFewTiles2 = 17;

/// What the two small-factor kernels' plans share: the row length N, Σ p², the largest p, threads
/// per block (128 where a row fits 128 threads' 32 elements, else 256; `sel` may ask for 256) and
/// rows per tile; false where the kernels do not apply.
struct SmallShape {
  long long N = 1, fel = 0, max_p = 1, rows = 0;
  int nt = 128;
};

bool small_shape(const std::vector<ModeDims>& modes, long long M, const Limits& lim, const FwdSelect& sel,
                 SmallShape& s) {
  if (!small_eligible(modes) || M < 1 || lim.smem_block_max == 0) return false;
  for (const ModeDims& d : modes) {
    s.N *= d.p;
    s.fel += d.p * d.p;
    s.max_p = std::max(s.max_p, d.p);
  }
  s.nt = sel.threads != 0 ? sel.threads : 128;
  if (s.N > 32LL * s.nt) s.nt = kThreads;  // 128 threads cover at most 4096 elements per row
  s.rows = 32LL * s.nt / s.N;
  return s.rows >= 1;
}

/// Fills seg's tile and grid fields for a small-factor kernel of `smem` bytes per block. Resident
/// blocks: two of 256 threads or four of 128 (≤ 128 registers), half that with p = 32 (see
/// kron_small_fwd_f32.cu), and what shared memory allows; the grid persistent. `few_tiles_fewer`
/// (the backward without a grid override): one block fewer per SM where three or more fit but the
/// tiles are few, fewer than kSmallBwdFewTiles2 / 2 per SM.
void small_fill(const SmallShape& s, std::size_t smem, long long M, const Limits& lim, const FwdSelect& sel,
                bool few_tiles_fewer, Segment& seg) {
  const long long by_regs = (s.nt == kThreads ? 2 : 4) / (s.max_p > 16 ? 2 : 1);
  long long per_sm =
      std::clamp<long long>(static_cast<long long>(lim.smem_per_sm / (smem + 1024)), 1, by_regs);
  const long long ntiles = (M + s.rows - 1) / s.rows;
  if (few_tiles_fewer && per_sm >= 3 && 2 * ntiles < kSmallBwdFewTiles2 * lim.num_sms) --per_sm;
  seg.small_threads = s.nt;
  seg.small_rows = static_cast<int>(s.rows);
  seg.smem = smem;
  seg.tm = static_cast<int>(s.rows);
  seg.tl = 1;
  seg.tiles_l = 1;
  seg.ntiles = ntiles;
  seg.grid = std::min<long long>(ntiles, per_sm * lim.num_sms);
  if (sel.grid > 0) seg.grid = std::min<long long>(seg.grid, sel.grid);  // tests: several tiles per block
}

/// Fills seg's small_* fields when the fiber-per-thread forward (kron_small.h) takes these modes;
/// false otherwise. auto takes it only where every p ≤ 16: with p = 32 the register-tile kernel
/// measured faster (H200, 1024 × (32⊗32): 9.1 against 11.0 µs). Threads: 128 (four blocks per SM)
/// wherever a row fits 128 threads' 32 elements each (N ≤ 4096), else 256: 1024 × (8⊗8⊗8⊗8) 15.6
/// against 17.4 µs, (16⊗16⊗16) 18.4 against 19.4 (more blocks, each with its own pipeline).
bool plan_small(const std::vector<ModeDims>& modes, long long M, const Limits& lim, const FwdSelect& sel,
                Segment& seg) {
  SmallShape s;
  if (!small_shape(modes, M, lim, sel, s) || (sel.kernel == 2 && s.max_p > 16)) return false;
  const std::size_t smem = static_cast<std::size_t>(s.fel + 2 * s.rows * s.N) * sizeof(float);
  if (smem > lim.smem_block_max) return false;
  small_fill(s, smem, M, lim, sel, false, seg);
  seg.small = true;
  return true;
}

/// Whether the backward selection takes the fiber-per-thread backward (kron_small_bwd.h) where it
/// fits: "small" always, "auto" for three or more factors (measured faster than the generic fused
/// backward for every such product of the bench; the only two-factor product in its scope,
/// 32 ⊗ 32, runs faster in the register-tile backward; see the table at the top).
bool small_bwd_selected(const FwdSelect& sel, const std::vector<ModeDims>& modes) {
  return sel.kernel == 3 || (sel.kernel == 2 && modes.size() >= 3);
}

/// Largest p and q of the natural split's head that kron_head.h's pass takes (kHeadMaxP).
constexpr long long kHeadMaxPass = 32;
/// Largest p and q for which auto takes the pass. Session 13 (H100, fp32, device time, gemm vs
/// pass, µs): heads of 8 forward 93.7 vs 53.6 (256 × [8^5]), 366 vs 194 (1024 × [8^5]), 101 vs 61
/// (256 × [8,16,16,16]), backward 6-13% faster; heads of 16 equal (64 / 256 × [16,8,8,8,8],
/// 256 × [16^4]) except 16 × [16^4] (14 vs 23, slower); heads of 32 slower (128 × [32^3]: 44 vs
/// 85). benchmarks/results/kron-head-H100-2026-11-25-session13.txt.
constexpr long long kHeadAutoMax = 8;

/// SPARSEKERN_KRON_HEAD (read at every plan): the largest head (p and q) the natural split runs
/// through kron_head.h's pass rather than strided-batched GEMMs: "auto" or unset kHeadAutoMax,
/// "kernel" kHeadMaxPass, "gemm" 0 (never).
long long head_pass_max() {
  const char* v = std::getenv("SPARSEKERN_KRON_HEAD");
  if (v == nullptr || *v == '\0' || std::string(v) == "auto") return kHeadAutoMax;
  if (std::string(v) == "gemm") return 0;
  if (std::string(v) == "kernel") return kHeadMaxPass;
  throw InvalidArgument(sparsekern::detail::concat(
      "SPARSEKERN_KRON_HEAD must be \"auto\", \"kernel\" or \"gemm\"; got \"", v, "\""));
}

/// Whether one small-factor or register-tile forward kernel takes the whole product.
bool one_forward_kernel(long long M, const std::vector<ModeDims>& modes, const Limits& lim, const FwdSelect& sel) {
  Segment probe;
  return (sel.kernel >= 2 && plan_small(modes, M, lim, sel, probe)) ||
         (sel.kernel >= 1 && plan_fast(modes, M, lim, sel.kernel == 3 ? FwdSelect{2} : sel, probe));
}

/// Fills seg's small_* and small_bwd fields when the fiber-per-thread backward (kron_small_bwd.h)
/// takes these modes (the forward's scope); false otherwise. Threads as the forward's; shared
/// memory: both factor copies and a pool of n + 1 tiles (n + 2 for two modes: X, ∂ℓ/∂Y, the states
/// S⁽¹⁾ … S⁽ⁿ⁻¹⁾, and the next tile's inputs in the first states that die).
bool plan_small_bwd(const std::vector<ModeDims>& modes, long long M, const Limits& lim, const FwdSelect& sel,
                    Segment& seg) {
  SmallShape s;
  if (!small_shape(modes, M, lim, sel, s)) return false;
  const long long n = static_cast<long long>(modes.size());
  const bool lean = sel.lean != 0 && n >= 3;  // one tile less: X read again for mode 0 (opt-in, measured slower)
  const long long nbuf = lean ? n : n + 1 + (n == 2 ? 1 : 0);
  const std::size_t smem = static_cast<std::size_t>(2 * s.fel + nbuf * s.rows * s.N) * sizeof(float);
  if (smem > lim.smem_block_max) return false;
  small_fill(s, smem, M, lim, sel, sel.grid == 0, seg);
  seg.small_bwd = true;
  seg.small_nbuf = static_cast<int>(nbuf);
  seg.small_lean = lean;
  return true;
}

/// The natural-order split: where no single kernel of the small-factor or register-tile kind
/// takes the whole product (e.g. 256 × (16⊗16⊗16⊗16): Π p = 65536 is past the small-factor
/// kernel's 8192; 128 × (32⊗32⊗32)) but one takes modes 1 … n−1 over the M · p₀ rows of X's
/// natural layout, mode 0 follows as one strided-batched GEMM (per row of X: Yₘ (q₀ × L) =
/// F₀ᵀ · Tₘ (p₀ × L)), and the backward mirrors it. Two passes over the data like the generic
/// plan's two groups, but through the faster kernels. Never under "old"; X's rows (and the
/// backward's ∂ℓ/∂X's) must be dense (make_plan's x_dense). See the table at the top.
/// Plans the tail's kernel into `tail` (the forward's, or with `backward` the small-factor
/// backward as selected or the two-factor register-tile backward); false where none takes it.
bool plan_natural_tail(long long M, const std::vector<ModeDims>& modes, const Limits& lim, const FwdSelect& sel,
                       bool backward, Segment& tail) {
  const int n = static_cast<int>(modes.size());
  if (sel.kernel < 1 || n < 3 || M < 1 || lim.smem_block_max == 0) return false;
  if (M > (1LL << 40) / modes[0].p) return false;
  const std::vector<ModeDims> rest(modes.begin() + 1, modes.end());
  const long long rows = M * modes[0].p;
  const FwdSelect fast_sel = sel.kernel == 3 ? FwdSelect{2} : sel;
  if (backward)
    return (small_bwd_selected(sel, rest) && plan_small_bwd(rest, rows, lim, sel, tail)) ||
           (fast_bwd_eligible(rest) && plan_fast_bwd(rest, rows, lim, fast_sel, tail));
  return (sel.kernel >= 2 && plan_small(rest, rows, lim, sel, tail)) || plan_fast(rest, rows, lim, fast_sel, tail);
}

}  // namespace

bool small_eligible(const std::vector<ModeDims>& modes) {
  const int n = static_cast<int>(modes.size());
  if (n < 2 || n > kMaxFused) return false;
  long long N = 1;
  for (const ModeDims& d : modes) {
    if (d.p != d.q || (d.p != 4 && d.p != 8 && d.p != 16 && d.p != 32)) return false;
    N *= d.p;
  }
  return N >= 1024 && N <= 8192;
}

FastLayout fast_layout(const std::vector<ModeDims>& modes, int chunks, int nstage) {
  FastLayout L;
  const int n = static_cast<int>(modes.size());
  L.nf = n;
  long long H[kMaxFused + 1], S[kMaxFused + 1];
  H[0] = 1;
  for (int t = 0; t < n; ++t) H[t + 1] = H[t] * modes[t].p;
  S[n - 1] = 1;
  for (int t = n - 2; t >= 0; --t) S[t] = S[t + 1] * modes[t + 1].q;
  const long long p_last = modes[n - 1].p, p4 = round_up(p_last, 4);
  long long f_off = 0, cs = 0;
  for (int t = 0; t < n; ++t) {
    const long long p = modes[t].p, q = modes[t].q;
    L.qpad[t] = std::max(8, pow2_at_least(q));
    L.s[t] = static_cast<int>(S[t]);
    L.hs[t] = static_cast<int>(H[t] * S[t]);
    L.out_per_chunk = std::max<long long>(L.out_per_chunk, static_cast<long long>(L.qpad[t]) * H[t] * S[t]);
    L.f_off[t] = static_cast<int>(f_off);
    f_off += (t == n - 1 ? p4 : p) * L.qpad[t];  // the last factor's copy: p rounded up to 4 rows, zeros past p
    if (t <= n - 2) {  // a state in the chunk buffer (see kron_fast.h: hstride ≡ s mod 32 when s < 32)
      const long long blk = p * S[t];
      L.pad[t] = (t == 0 || S[t] >= 32) ? 0 : static_cast<int>(((S[t] - blk) % 32 + 32) % 32);
      L.hstride[t] = static_cast<int>(blk + L.pad[t]);
      cs = std::max(cs, H[t] * (blk + L.pad[t]));
    }
  }
  cs = round_up(cs, 4);
  // The X tile (natural order, see kron_fast.h): pitch ≡ 4 (mod 8), so that a warp's 16-byte loads
  // of one k group from up to eight consecutive rows fall in different bank groups.
  L.xp = static_cast<int>(p4 % 8 == 0 ? p4 + 4 : p4);
  const long long rows = static_cast<long long>(chunks) * H[n - 1];  // rows of the tile (last step's n)
  const long long xsize = round_up(std::max<long long>(rows, 1) * L.xp, 4);
  L.cs = static_cast<int>(cs);
  L.off_x0 = static_cast<int>(round_up(f_off, 4));
  L.off_x1 = static_cast<int>(L.off_x0 + (nstage == 2 ? xsize : 0));
  L.off_s = static_cast<int>(L.off_x1 + xsize);
  const long long total = L.off_s + static_cast<long long>(chunks) * cs;
  L.smem = total > (1LL << 29) ? std::numeric_limits<std::size_t>::max() : static_cast<std::size_t>(total) * 4;
  return L;
}

std::size_t fast_bwd_layout(const std::vector<ModeDims>& modes, int chunks, int nstage, bool kept,
                            FastBwdArgs& a) {
  auto wide = [](long long v) { return std::max(8, pow2_at_least(static_cast<int>(v))); };
  const int C = chunks;
  a.p0 = static_cast<int>(modes[0].p);
  a.q0 = static_cast<int>(modes[0].q);
  a.p1 = static_cast<int>(modes[1].p);
  a.q1 = static_cast<int>(modes[1].q);
  a.p0p = wide(a.p0);
  a.q0p = wide(a.q0);
  a.p1p = wide(a.p1);
  a.q1p = wide(a.q1);
  a.chunks = C;
  a.nstage = nstage;
  // Pitches ≡ 4 (mod 32) where a warp writes or reads along the other index (see kron_fast_bwd.h).
  a.rb = static_cast<int>(round_up(static_cast<long long>(C) * a.p0, 32) + 4);
  a.dtp = a.q0p + 4;
  a.ttp = a.p0p + 4;
  a.gn_swz = a.q1p >= 32 ? 1 : 0;
  a.gnp = a.gn_swz ? a.q1p : a.q1p + 4;
  long long cur = 0;
  a.off_f1 = 0;
  if (!kept) cur += static_cast<long long>(a.p1) * a.q1p;  // F1 (the T0 step only)
  a.off_f0t = static_cast<int>(cur);
  cur += static_cast<long long>(a.q0) * (a.p0p + 4);  // F0ᵀ, F1ᵀ: pitch + 4 (kron_fast_bwd.h)
  a.off_f1t = static_cast<int>(cur);
  cur += static_cast<long long>(a.q1) * (a.p1p + 4);
  cur = round_up(cur, 4);
  const long long P = static_cast<long long>(a.p0) * a.p1, Q = static_cast<long long>(a.q0) * a.q1;
  const long long t0t = static_cast<long long>(C) * a.q1 * a.ttp;
  // T0 kept with one stage: GN and GT go over T0T and DT (kron_fast_bwd.h's `late` program) where
  // GT fits DT, T0T's place sized for GN too.
  const bool late = kept && nstage == 1 && a.rb <= static_cast<long long>(C) * a.dtp;
  // A stage: XT (recompute) or T0T (kept) first, then XN, DN, DT.
  const long long first = !kept ? round_up(static_cast<long long>(a.p1) * a.rb, 4)
                          : late ? round_up(std::max(t0t, static_cast<long long>(C) * a.p0 * a.gnp), 4)
                                 : t0t;
  a.in_t0t = 0;
  a.in_xn = static_cast<int>(first);
  a.in_dn = static_cast<int>(first + C * P);
  a.in_dt = static_cast<int>(first + C * P + C * Q);
  const long long stage = first + C * P + C * Q + static_cast<long long>(C) * a.q1 * a.dtp;
  a.off_in[0] = static_cast<int>(cur);
  a.off_in[1] = static_cast<int>(cur + (nstage == 2 ? stage : 0));
  a.off_scratch = a.off_in[0];
  cur += stage * nstage;
  a.off_t0t = static_cast<int>(cur);
  if (!kept) cur += t0t;
  // T0 kept, two stages: GN and GT go over DN and DT where they fit (GN's pitch without its padding
  // if need be).
  a.alias = late ? 1 : 0;
  if (kept && !late && a.rb <= static_cast<long long>(C) * a.dtp) {
    if (static_cast<long long>(a.p0) * a.gnp <= Q) {
      a.alias = 1;
    } else if (static_cast<long long>(a.p0) * a.q1p <= Q) {
      a.alias = 1;
      a.gnp = a.q1p;
    }
  }
  a.off_gn = static_cast<int>(cur);
  a.off_gt = static_cast<int>(cur);
  if (!a.alias) {
    cur += static_cast<long long>(C) * a.p0 * a.gnp;
    a.off_gt = static_cast<int>(cur);
    cur += static_cast<long long>(a.q1) * a.rb;
  }
  constexpr int kWarps = kThreads / 32;
  a.grad[0] = fb_grad_plan(a.q0p, a.p0, C * a.q1, kWarps, false);
  a.grad[1] = fb_grad_plan(a.q1p, a.p1, C * a.p0, kWarps, a.gn_swz != 0);  // fb_grad_swz: q1p ≥ 32
  // The ∂ℓ/∂F split sums at the end reuse the buffers from off_scratch on: at most 8 splits of a p × q
  // block per mode (see fb_split), 4096 floats each.
  const long long scratch = a.off_scratch + 2LL * 4096;
  const long long total = std::max(cur, scratch);
  return total > (1LL << 29) ? std::numeric_limits<std::size_t>::max() : static_cast<std::size_t>(total) * 4;
}

Plan make_plan(long long M, const std::vector<ModeDims>& modes, DType dtype, const Limits& lim,
               bool backward, bool x_dense) {
  Plan plan;
  plan.backward = backward;
  plan.M = M;
  const int n = static_cast<int>(modes.size());
  const std::size_t es = dtype_size(dtype), as = acc_size(dtype);
  // A two-factor fp32 backward that the register-tile kernel takes is one group whatever the
  // traffic estimate below says of the generic kernel's groupings; likewise the small-factor
  // backward when selected (SPARSEKERN_KRON_BWD_KERNEL=small).
  // The kernel selection of this direction, read once (fp32 device plans only), so that the
  // grouping and the segments' kernels below agree.
  const FwdSelect sel = lim.gemm_steps || dtype != DType::f32 ? FwdSelect{}
                        : backward                            ? backward_select()
                                                              : forward_select();
  bool fast_bwd = false;
  if (!lim.gemm_steps && backward && dtype == DType::f32 && M >= 1) {
    if (sel.kernel >= 1 && fast_bwd_eligible(modes)) {
      FastBwdArgs a;
      fast_bwd = fast_bwd_layout(modes, 1, 1, false, a) <= lim.smem_block_max;
    }
    Segment probe;
    if (small_bwd_selected(sel, modes) && plan_small_bwd(modes, M, lim, sel, probe)) fast_bwd = true;
  }

  // Group the modes. Every grouping does the same arithmetic (modes always apply last to first),
  // so groupings differ in memory traffic: each group reads and writes the whole state once, and a
  // group whose tile spans fewer than 32 bytes of consecutive outer indices stores partial sectors.
  // A dynamic program over the cut points picks the grouping with the least estimated traffic.
  std::vector<Segment> groups;
  Segment probe;
  if (lim.gemm_steps) {  // the CPU's plan: one GEMM step per mode
    for (int k = 0; k < n; ++k) {
      groups.emplace_back();
      groups.back().kind = SegKind::gemm;
      groups.back().first = k;
      groups.back().count = 1;
    }
  } else if (fast_bwd) {
    groups.emplace_back();
    groups.back().first = 0;
    groups.back().count = n;
  } else if (dtype == DType::f32 && x_dense && (backward || !one_forward_kernel(M, modes, lim, sel)) &&
             plan_natural_tail(M, modes, lim, sel, backward, probe)) {
    groups.resize(2);
    groups[0].kind = SegKind::gemm;
    groups[0].first = 0;
    groups[0].count = 1;
    groups[1].first = 1;
    groups[1].count = n - 1;
    groups[0].natural = groups[1].natural = true;
  } else {
    groups = choose_groups(M, modes, dtype, lim, backward);
  }
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
      const long long head_max = seg.natural ? head_pass_max() : 0;
      seg.head_pass = seg.natural && d.p <= head_max && d.q <= head_max && seg.L % 4 == 0;
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
      // Two modes in one group, fp32: the register-tile backward when selected and it fits.
      if (dtype == DType::f32 && seg.L == 1 && seg.count == n) {
        const bool small = small_bwd_selected(sel, modes) && plan_small_bwd(modes, M, lim, sel, seg);
        if (!small && sel.kernel >= 1) plan_fast_bwd(modes, M, lim, sel.kernel == 3 ? FwdSelect{2} : sel, seg);
      } else if (seg.natural) {  // the natural split's tail: the kernel the grouping found
        if (!plan_natural_tail(M, modes, lim, sel, true, seg))
          throw std::logic_error("kron: the natural split's tail has no kernel");
        // The backward recomputes this segment's output (the head's input state) first: with the
        // small-factor forward on the same tiles (its launch gets the backward's shared memory and
        // grid, more than it needs); the register-tile backward's plan has its forward fields.
        if (seg.small_bwd) seg.small = true;
      }
    } else {
      seg.grid = std::min<long long>(seg.ntiles, 1LL << 30);
      // One group over every mode, fp32: the register-tile kernel when selected and it fits.
      if (dtype == DType::f32 && seg.L == 1 && seg.count == n) {
        const bool small = sel.kernel >= 2 && plan_small(modes, M, lim, sel, seg);
        if (!small && sel.kernel >= 1) plan_fast(modes, M, lim, sel.kernel == 3 ? FwdSelect{2} : sel, seg);
      } else if (seg.natural) {  // the natural split's tail: the kernel the grouping found
        if (!plan_natural_tail(M, modes, lim, sel, false, seg))
          throw std::logic_error("kron: the natural split's tail has no kernel");
      }
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
    std::size_t partial = 0, accum = 0, fused_partial = 0, head_pass = 0;
    for (const Segment& seg : plan.segs) {
      if (seg.kind == SegKind::fused) {
        const std::size_t b = static_cast<std::size_t>(std::max(seg.grid, seg.kept_grid)) * seg.part_stride * as;
        partial = std::max(partial, b);
        fused_partial = std::max(fused_partial, b);
      } else {
        const ModeDims& d = modes[seg.first];
        // The natural split head's ∂ℓ/∂F passes (fp32 heads of head_grad_pass_pq, kron_matmul.cpp's
        // head_grad_fits) write up to kHeadGradBlocks partials.
        const bool pass = seg.natural && dtype == DType::f32 && head_grad_pass_pq(d.p, d.q);
        const long long parts = pass ? std::max(seg.gemm_chunk, kHeadGradBlocks) : seg.gemm_chunk;
        partial = std::max(partial, static_cast<std::size_t>(parts * d.p * d.q) * as);
        accum = std::max(accum, static_cast<std::size_t>(d.p * d.q) * as);
        if (pass) head_pass = static_cast<std::size_t>(parts * d.p * d.q) * as;
      }
    }
    // A natural split's head leaves its pass's partials for the tail's reduction launch to sum
    // (kron_matmul.cpp: matmul_backward), so the tail's partials go after them.
    if (NS == 2 && plan.segs[0].natural && head_pass > 0)
      partial = std::max(partial, align_up(head_pass) + fused_partial);
    plan.off_partial = cur; cur += align_up(partial);
    plan.off_acc = cur; cur += align_up(accum);
  }
  plan.ws_bytes = cur;
  return plan;
}

}  // namespace sparsekern::kron::detail

namespace sparsekern::kron {

void set_forward_kernel(const std::string& name) {
  const detail::FwdSelect sel =
      name.empty() ? detail::FwdSelect{} : detail::parse_forward_kernel(name, "the kernel name");
  std::lock_guard<std::mutex> lock(detail::g_select_mutex);
  detail::g_select = sel;  // kernel −1 when empty: the next plan reads the environment again
  detail::g_select_epoch.fetch_add(1);
}

void set_backward_kernel(const std::string& name) {
  const detail::FwdSelect sel =
      name.empty() ? detail::FwdSelect{} : detail::parse_forward_kernel(name, "the kernel name");
  std::lock_guard<std::mutex> lock(detail::g_select_mutex);
  detail::g_bwd_select = sel;
  detail::g_select_epoch.fetch_add(1);
}

std::uint64_t selection_epoch() { return detail::g_select_epoch.load(); }

std::string backward_kernel() { return detail::select_name(detail::backward_select()); }

std::string forward_kernel() { return detail::select_name(detail::forward_select()); }

}  // namespace sparsekern::kron
