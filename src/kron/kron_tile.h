#pragma once
// Block programs of the fused Kronecker kernels, shared by the CUDA kernels (kron_fused.cuh) and the
// CPU backend (kron_matmul_cpu.cpp).
//
// A program is a sequence of *phases*. In a phase every thread of the block runs the same function
// with its own thread index; a phase ends with a block-wide barrier. On the GPU `Exec::phase` calls
// the function with threadIdx.x, then __syncthreads(); the CPU backend runs the phase for threads
// 0, 1, …, kThreads−1 in turn, over a host buffer that stands in for shared memory. So the CPU
// tests run the very tiling and index arithmetic of the GPU kernels. The rules that make this
// sound: within a phase a thread writes only locations no other thread reads or writes in that
// phase, and nothing a thread computes survives a barrier except in shared or global memory.
//
// `Ops` supplies the element type and its conversions: Ops::T (storage), Ops::Acc (accumulator,
// also the type of everything in shared memory), Ops::V (elements per 16-byte vector),
// to_acc / from_acc / load_vec / store_vec.

#include <type_traits>

#include "kron_internal.h"

#if defined(__CUDACC__)
#define SK_KRON_FN __device__ __forceinline__
#define SK_KRON_PROGRAM __device__
#define SK_KRON_UNROLL _Pragma("unroll")
#else
#define SK_KRON_FN inline
#define SK_KRON_PROGRAM inline
#define SK_KRON_UNROLL
#endif

namespace sparsekern::kron::detail {

/// Rows per thread of a step's register tile. A warp covers 32·kRowsPerThread rows (lane-strided,
/// so each of its shared-memory loads reads 32 consecutive rows) × `RN` columns: 4 × 8 gives 32
/// FMAs per 4 scalar + 2 vector loads, enough to keep FFMA issue ahead of shared-memory traffic.
constexpr int kRowsPerThread = 4;
/// Side of a thread's tile of a ∂ℓ/∂F block (4 × 4 outputs: 16 FMAs per 8 loads per row).
constexpr int kGradTile = 4;

/// Where a tile starts: rows m0…, outer indices l0… (tlv of them valid, ≤ tl).
struct TileCoord {
  long long m0 = 0, l0 = 0;
  int tlv = 0;
};

SK_KRON_FN TileCoord tile_at(const FusedArgs& a, long long t) {
  TileCoord tc;
  const long long tmi = t / a.tiles_l;
  tc.m0 = tmi * a.tm;
  tc.l0 = (t - tmi * a.tiles_l) * a.tl;
  const long long left = a.L - tc.l0;
  tc.tlv = left < a.tl ? static_cast<int>(left) : a.tl;
  return tc;
}

// ------------------------------------------------------------------------------------------------
// Global ↔ shared memory
// ------------------------------------------------------------------------------------------------

/// Whether copy_acc copies asynchronously: on sm_80+, when the storage type is the accumulator type
/// (fp32, fp64), as cp.async. A plain load followed by a shared store serialises on the GPU (the
/// compiler cannot hoist the next load above a store through generic pointers): one global latency
/// per element a thread copies.
template <class Ops>
constexpr bool kAsyncCopy = std::is_same_v<typename Ops::T, typename Ops::Acc> &&
                            (sizeof(typename Ops::T) == 4 || sizeof(typename Ops::T) == 8);

/// *dst ← to_acc(*src): cp.async where kAsyncCopy (finished by copy_drain), else a plain copy.
template <class Ops>
SK_KRON_FN void copy_acc(typename Ops::Acc* dst, const typename Ops::T* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (kAsyncCopy<Ops>) {
    const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(d), "l"(src), "n"(sizeof(typename Ops::T))
                 : "memory");
    return;
  }
#endif
  *dst = Ops::to_acc(*src);
}

/// Waits for this thread's copy_acc copies (the phase's barrier then makes them visible to all).
template <class Ops>
SK_KRON_FN void copy_drain() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (kAsyncCopy<Ops>) asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
#endif
}

/// Copies every factor of the group into shared memory as ppad × qpad (row-major, zero-padded).
template <class Ops>
SK_KRON_FN void load_factors(const FusedArgs& a, typename Ops::Acc* sm, int tid, int nt) {
  using T = typename Ops::T;
  for (int t = 0; t < a.nf; ++t) {
    const FusedMode& md = a.mode[t];
    const T* f = static_cast<const T*>(md.f);
    const int total = md.ppad * md.qpad;
    for (int e = tid; e < total; e += nt) {
      const int i = e / md.qpad, j = e - (e / md.qpad) * md.qpad;
      if (i < md.p && j < md.q)
        copy_acc<Ops>(sm + md.f_off + e, f + i * md.f_rs + j * md.f_cs);
      else
        sm[md.f_off + e] = typename Ops::Acc(0);
    }
  }
  copy_drain<Ops>();
}

/// Loads the tile's chunks of a contiguous-chunk state (X[m, l, s] at src[m·ld + l·s_chunk + s])
/// into `buf` (chunk c at c·csp). Chunks past M or past L are zero-filled so that they contribute
/// nothing to gradient sums.
template <class Ops>
SK_KRON_FN void load_contig(const void* src_v, long long ld, int vec, const FusedArgs& a,
                            const TileCoord& tc, typename Ops::Acc* buf, int s, const FastDiv& div_s,
                            int tid, int nt) {
  using T = typename Ops::T;
  using Acc = typename Ops::Acc;
  constexpr int V = Ops::V;
  for (int r = 0; r < a.tm; ++r) {
    const long long m = tc.m0 + r;
    const int c0 = r * a.tl;
    int nvalid = 0;
    if (m < a.M) {
      nvalid = tc.tlv;
      const T* row = static_cast<const T*>(src_v) + m * ld + tc.l0 * s;
      const int n = nvalid * s;
      if (kAsyncCopy<Ops>) {  // element-wise cp.async: consecutive lanes, consecutive elements
        for (int e = tid; e < n; e += nt) {
          const int c = div_s.div(e);
          copy_acc<Ops>(buf + (c0 + c) * a.csp + swz(e - c * s, a.sh), row + e);
        }
      } else if (vec) {
        for (int e = tid * V; e < n; e += nt * V) {
          Acc v[V];
          Ops::load_vec(row + e, v);
          const int c = div_s.div(e);
          const int sp = e - c * s;  // s % V == 0, so the vector stays inside one chunk
          Acc* dst = buf + (c0 + c) * a.csp;
          SK_KRON_UNROLL
          for (int k = 0; k < V; ++k) dst[swz(sp + k, a.sh)] = v[k];
        }
      } else {
        for (int e = tid; e < n; e += nt) {
          const int c = div_s.div(e);
          buf[(c0 + c) * a.csp + swz(e - c * s, a.sh)] = Ops::to_acc(row[e]);
        }
      }
    }
    const int nz = (a.tl - nvalid) * s;
    for (int e = tid; e < nz; e += nt) {
      const int c = div_s.div(e);
      buf[(c0 + nvalid + c) * a.csp + swz(e - c * s, a.sh)] = Acc(0);
    }
  }
  copy_drain<Ops>();
}

/// Stores the tile's valid chunks of `buf` to a contiguous-chunk state (inverse of load_contig).
template <class Ops>
SK_KRON_FN void store_contig(void* dst_v, long long ld, int vec, const FusedArgs& a, const TileCoord& tc,
                             const typename Ops::Acc* buf, int s, const FastDiv& div_s, int tid, int nt) {
  using T = typename Ops::T;
  using Acc = typename Ops::Acc;
  constexpr int V = Ops::V;
  for (int r = 0; r < a.tm; ++r) {
    const long long m = tc.m0 + r;
    if (m >= a.M) break;
    const int c0 = r * a.tl;
    T* row = static_cast<T*>(dst_v) + m * ld + tc.l0 * s;
    const int n = tc.tlv * s;
    if (vec) {
      for (int e = tid * V; e < n; e += nt * V) {
        const int c = div_s.div(e);
        const int sp = e - c * s;
        const Acc* src = buf + (c0 + c) * a.csp;
        Acc v[V];
        SK_KRON_UNROLL
        for (int k = 0; k < V; ++k) v[k] = src[swz(sp + k, a.sh)];
        Ops::store_vec(row + e, v);
      }
    } else {
      for (int e = tid; e < n; e += nt) {
        const int c = div_s.div(e);
        row[e] = Ops::from_acc(buf[(c0 + c) * a.csp + swz(e - c * s, a.sh)]);
      }
    }
  }
}

/// Stores the tile's valid chunks of `buf` (chunk element j) to an output-layout state
/// Y[m, j, l] at dst[m·ld + j·L + l]. Consecutive threads take consecutive l (coalesced when
/// tl > 1); with L = 1 a chunk is one contiguous run of the row and is stored with vectors.
template <class Ops>
SK_KRON_FN void store_strided(void* dst_v, long long ld, int vec, const FusedArgs& a,
                              const TileCoord& tc, const typename Ops::Acc* buf, int s, int tid, int nt) {
  using T = typename Ops::T;
  using Acc = typename Ops::Acc;
  constexpr int V = Ops::V;
  for (int r = 0; r < a.tm; ++r) {
    const long long m = tc.m0 + r;
    if (m >= a.M) break;
    T* row = static_cast<T*>(dst_v) + m * ld + tc.l0;
    if (a.L == 1) {  // then tl == 1: chunk r is the whole row
      const Acc* src = buf + r * a.csp;
      if (vec) {
        for (int e = tid * V; e < s; e += nt * V) {
          Acc v[V];
          SK_KRON_UNROLL
          for (int k = 0; k < V; ++k) v[k] = src[swz(e + k, a.sh)];
          Ops::store_vec(row + e, v);
        }
      } else {
        for (int e = tid; e < s; e += nt) row[e] = Ops::from_acc(src[swz(e, a.sh)]);
      }
    } else {
      const int n = s * a.tl;
      for (int e = tid; e < n; e += nt) {
        const int j = a.div_tl.div(e);
        const int lt = e - j * a.tl;
        if (lt < tc.tlv)
          row[j * a.L + lt] = Ops::from_acc(buf[(r * a.tl + lt) * a.csp + swz(j, a.sh)]);
      }
    }
  }
}

/// Loads an output-layout state (inverse of store_strided), zero-filling chunks past M or L.
template <class Ops>
SK_KRON_FN void load_strided(const void* src_v, long long ld, int vec, const FusedArgs& a,
                             const TileCoord& tc, typename Ops::Acc* buf, int s, int tid, int nt) {
  using T = typename Ops::T;
  using Acc = typename Ops::Acc;
  constexpr int V = Ops::V;
  for (int r = 0; r < a.tm; ++r) {
    const long long m = tc.m0 + r;
    const bool row_ok = m < a.M;
    const T* row = static_cast<const T*>(src_v) + (row_ok ? m * ld + tc.l0 : 0);
    if (a.L == 1) {
      Acc* dst = buf + r * a.csp;
      if (kAsyncCopy<Ops>) {
        for (int e = tid; e < s; e += nt) {
          if (row_ok)
            copy_acc<Ops>(dst + swz(e, a.sh), row + e);
          else
            dst[swz(e, a.sh)] = Acc(0);
        }
      } else if (vec && row_ok) {
        for (int e = tid * V; e < s; e += nt * V) {
          Acc v[V];
          Ops::load_vec(row + e, v);
          SK_KRON_UNROLL
          for (int k = 0; k < V; ++k) dst[swz(e + k, a.sh)] = v[k];
        }
      } else {
        for (int e = tid; e < s; e += nt) dst[swz(e, a.sh)] = row_ok ? Ops::to_acc(row[e]) : Acc(0);
      }
    } else {
      const int n = s * a.tl;
      for (int e = tid; e < n; e += nt) {
        const int j = a.div_tl.div(e);
        const int lt = e - j * a.tl;
        Acc* d = buf + (r * a.tl + lt) * a.csp + swz(j, a.sh);
        if (row_ok && lt < tc.tlv)
          copy_acc<Ops>(d, row + j * a.L + lt);
        else
          *d = Acc(0);
      }
    }
  }
  copy_drain<Ops>();
}

// ------------------------------------------------------------------------------------------------
// One mode applied to every chunk of the tile: a small GEMM from one shared buffer to another
// ------------------------------------------------------------------------------------------------

/// out(r, n) = Σ_kk in(r, kk) · f(kk, n) for the rows r = (c, l) of all chunks c, l < lc, where
/// in(r, kk) is chunk element l·in_rs + kk·in_ks, out(r, n) is chunk element l·out_rs + n·out_ns
/// and f(kk, n) = f[kk·f_ks + n·f_ns] (a zero-padded shared copy, so reads up to the tile width
/// need no bounds checks).
///   forward  (mode applied):   K = p, N = q, in = (lc, p) row-major, out = (q, lc), f = F
///   backward (mode pulled back): K = q, N = p, in = (q, lc), out = (lc, p) row-major, f = Fᵀ
template <typename Acc>
struct StepDesc {
  const Acc* in = nullptr;
  Acc* out = nullptr;
  const Acc* f = nullptr;
  int f_ks = 0, f_ns = 0;
  int rows = 0;
  int lc = 0;
  FastDiv div_lc;
  int K = 0, N = 0;
  int in_rs = 0, in_ks = 0, out_rs = 0, out_ns = 0;
  int csp = 0, sh = 5;
};

template <typename Acc, int RN>
SK_KRON_FN void load_frow(const Acc* p, int ns, Acc (&out)[RN]) {
#if defined(__CUDA_ARCH__)
  if (ns == 1) {  // 16-byte aligned by construction: offsets are multiples of the tile width
    if constexpr (std::is_same<Acc, float>::value) {
      SK_KRON_UNROLL
      for (int v = 0; v < RN; v += 4) {
        const float4 t = *reinterpret_cast<const float4*>(p + v);
        out[v] = t.x; out[v + 1] = t.y; out[v + 2] = t.z; out[v + 3] = t.w;
      }
    } else {
      SK_KRON_UNROLL
      for (int v = 0; v < RN; v += 2) {
        const double2 t = *reinterpret_cast<const double2*>(p + v);
        out[v] = t.x; out[v + 1] = t.y;
      }
    }
    return;
  }
#endif
  SK_KRON_UNROLL
  for (int v = 0; v < RN; ++v) out[v] = p[v * ns];
}

/// The K loop of one work item: acc[u][v] += Σ_k in(row u, k) · f(k, n0 + v). With `kUnit` the
/// elements of a run are adjacent in shared memory (compile-time stride 1: the unrolled loads use
/// immediate offsets); otherwise they are `kstep` apart, or (kblk = 1) each address is computed.
template <typename Acc, int RN, bool kUnit>
SK_KRON_FN void step_kloop(const StepDesc<Acc>& s, const int (&cbase)[kRowsPerThread],
                           const int (&lrow)[kRowsPerThread], int n0, int kblk, int kstep,
                           Acc (&acc)[kRowsPerThread][RN]) {
  constexpr int RM = kRowsPerThread;
  for (int kb = 0; kb < s.K; kb += kblk) {
    const Acc* ap[RM];
    SK_KRON_UNROLL
    for (int u = 0; u < RM; ++u) ap[u] = s.in + cbase[u] + swz(lrow[u] * s.in_rs + kb * s.in_ks, s.sh);
    const int kn = s.K - kb < kblk ? s.K - kb : kblk;
    const Acc* frow = s.f + kb * s.f_ks + n0 * s.f_ns;
#if defined(__CUDACC__)
#pragma unroll 4
#endif
    for (int kk = 0; kk < kn; ++kk) {
      Acc fv[RN];
      load_frow<Acc, RN>(frow + kk * s.f_ks, s.f_ns, fv);
      Acc av[RM];
      SK_KRON_UNROLL
      for (int u = 0; u < RM; ++u) av[u] = kUnit ? ap[u][kk] : ap[u][kk * kstep];
      SK_KRON_UNROLL
      for (int u = 0; u < RM; ++u) {
        SK_KRON_UNROLL
        for (int v = 0; v < RN; ++v) acc[u][v] += av[u] * fv[v];
      }
    }
  }
}

template <typename Acc, int RN>
SK_KRON_FN void step_thread(const StepDesc<Acc>& s, int tid, int nt) {
  constexpr int RM = kRowsPerThread;
  const int lane = tid & 31, warp = tid >> 5, nwarps = nt >> 5;
  const int row_tiles = (s.rows + 32 * RM - 1) / (32 * RM);
  const int col_groups = (s.N + RN - 1) / RN;
  const int items = row_tiles * col_groups;
  // How a row's K elements sit in shared memory (padding period P = 2^sh), so that the inner
  // loop is one load per element:
  //  - rows of p consecutive elements with p dividing P or a multiple of it: runs of min(p, P)
  //    never cross a padding slot, so within a run the address steps by 1;
  //  - elements lc apart with lc a multiple of P: every step crosses lc/P padding slots;
  //  - otherwise the swizzled address is recomputed per element.
  const int period = 1 << s.sh;
  int kblk = 1, kstep = 0;
  if (s.in_ks == 1 && (s.K % period == 0 || period % s.K == 0)) {
    kblk = s.K < period ? s.K : period;
    kstep = 1;
  } else if (s.in_ks % period == 0) {
    kblk = s.K;
    kstep = s.in_ks + (s.in_ks >> s.sh);
  }
  // The same for the RN outputs of a row: a constant address step when they are out_ns apart with
  // out_ns a multiple of P, or adjacent within one padding period; else computed per output.
  int ostep = 0;
  if (s.out_ns % period == 0)
    ostep = s.out_ns + (s.out_ns >> s.sh);
  else if (s.out_ns == 1 && period % RN == 0 && (s.out_rs % period == 0 || period % s.out_rs == 0))
    ostep = 1;
  for (int w = warp; w < items; w += nwarps) {
    const int rt = w / col_groups;
    const int n0 = (w - rt * col_groups) * RN;
    int cbase[RM], lrow[RM];
    bool ok[RM];
    SK_KRON_UNROLL
    for (int u = 0; u < RM; ++u) {
      const int r = (rt * RM + u) * 32 + lane;
      ok[u] = r < s.rows;
      const int rr = ok[u] ? r : 0;
      const int c = s.div_lc.div(rr);
      lrow[u] = rr - c * s.lc;
      cbase[u] = c * s.csp;
    }
    Acc acc[RM][RN];
    SK_KRON_UNROLL
    for (int u = 0; u < RM; ++u) {
      SK_KRON_UNROLL
      for (int v = 0; v < RN; ++v) acc[u][v] = Acc(0);
    }
    if (kstep == 1)
      step_kloop<Acc, RN, true>(s, cbase, lrow, n0, kblk, kstep, acc);
    else
      step_kloop<Acc, RN, false>(s, cbase, lrow, n0, kblk, kstep, acc);
    SK_KRON_UNROLL
    for (int u = 0; u < RM; ++u) {
      if (!ok[u]) continue;
      if (ostep != 0) {
        Acc* o = s.out + cbase[u] + swz(lrow[u] * s.out_rs + n0 * s.out_ns, s.sh);
        SK_KRON_UNROLL
        for (int v = 0; v < RN; ++v)
          if (n0 + v < s.N) o[v * ostep] = acc[u][v];
      } else {
        SK_KRON_UNROLL
        for (int v = 0; v < RN; ++v) {
          const int n = n0 + v;
          if (n < s.N) s.out[cbase[u] + swz(lrow[u] * s.out_rs + n * s.out_ns, s.sh)] = acc[u][v];
        }
      }
    }
  }
}

/// The step applying mode t to buffer `in` (chunks (lc, p)) into `out` (chunks (q, lc)).
template <typename Acc>
SK_KRON_FN StepDesc<Acc> forward_step(const FusedArgs& a, int t, const Acc* in, Acc* out, const Acc* sm) {
  const FusedMode& md = a.mode[t];
  StepDesc<Acc> s;
  s.in = in; s.out = out; s.f = sm + md.f_off;
  s.f_ks = md.qpad; s.f_ns = 1;
  s.lc = md.lc; s.div_lc = md.div_lc; s.rows = a.tm * a.tl * md.lc;
  s.K = md.p; s.N = md.q;
  s.in_rs = md.p; s.in_ks = 1; s.out_rs = 1; s.out_ns = md.lc;
  s.csp = a.csp; s.sh = a.sh;
  return s;
}

/// The step pulling a gradient back through mode t: `in` chunks (q, lc) → `out` chunks (lc, p).
template <typename Acc>
SK_KRON_FN StepDesc<Acc> reverse_step(const FusedArgs& a, int t, const Acc* in, Acc* out, const Acc* sm) {
  const FusedMode& md = a.mode[t];
  StepDesc<Acc> s;
  s.in = in; s.out = out; s.f = sm + md.f_off;
  s.f_ks = 1; s.f_ns = md.qpad;  // f(kk = j, n = i) = F[i, j]
  s.lc = md.lc; s.div_lc = md.div_lc; s.rows = a.tm * a.tl * md.lc;
  s.K = md.q; s.N = md.p;
  s.in_rs = 1; s.in_ks = md.lc; s.out_rs = md.p; s.out_ns = 1;
  s.csp = a.csp; s.sh = a.sh;
  return s;
}

// ------------------------------------------------------------------------------------------------
// ∂ℓ/∂F of one mode over the tile: Σ over rows r = (c, l) of T(r, :)ᵀ · G(:, r)
// ------------------------------------------------------------------------------------------------

template <typename Acc>
struct GradDesc {
  const Acc* t = nullptr;  ///< forward state before the mode: chunks (lc, p)
  const Acc* g = nullptr;  ///< gradient of the state after it: chunks (q, lc)
  int rows = 0, lc = 0;
  FastDiv div_lc;
  int p = 0, q = 0, csp = 0, sh = 5;
  Acc* scratch = nullptr;
};

/// Row splits of a p×q gradient block: the 4×4 output tiles alone do not occupy every thread for
/// small factors, so the rows are split among the otherwise idle threads and summed afterwards.
SK_KRON_HD int grad_splits(int p, int q, int nt) {
  const int tiles = ((p + kGradTile - 1) / kGradTile) * ((q + kGradTile - 1) / kGradTile);
  return tiles >= nt ? 1 : nt / tiles;
}

/// Accumulator elements of scratch a gradient block needs.
SK_KRON_HD int grad_scratch_elems(int p, int q, int nt) {
  const int tiles = ((p + kGradTile - 1) / kGradTile) * ((q + kGradTile - 1) / kGradTile);
  return tiles * grad_splits(p, q, nt) * kGradTile * kGradTile;
}

/// Phase 1: thread w = (tile, split) sums rows split, split + splits, … of its 4×4 tile into scratch.
template <typename Acc>
SK_KRON_FN void grad_tiles_thread(const GradDesc<Acc>& d, int tid, int nt) {
  constexpr int GT = kGradTile;
  const int tiles_j = (d.q + GT - 1) / GT;
  const int tiles = ((d.p + GT - 1) / GT) * tiles_j;
  const int rs = grad_splits(d.p, d.q, nt);
  // A row's 4 T values l·p + i0 … +3 are adjacent in shared memory when p is a multiple of the
  // padding period or divides it; its 4 G values (j0 … j0+3)·lc + l are a constant step apart
  // when lc is a multiple of the period. Full tiles then load from two base addresses per row.
  const int period = 1 << d.sh;
  const bool t_adjacent = d.p % period == 0 || period % d.p == 0;
  const int gstep = d.lc % period == 0 ? d.lc + (d.lc >> d.sh) : 0;
  for (int w = tid; w < tiles * rs; w += nt) {
    const int split = w % rs, tile = w / rs;
    const int i0 = (tile / tiles_j) * GT, j0 = (tile % tiles_j) * GT;
    const bool fast = t_adjacent && gstep != 0 && i0 + GT <= d.p && j0 + GT <= d.q;
    Acc acc[GT][GT];
    SK_KRON_UNROLL
    for (int a = 0; a < GT; ++a) {
      SK_KRON_UNROLL
      for (int b = 0; b < GT; ++b) acc[a][b] = Acc(0);
    }
    for (int r = split; r < d.rows; r += rs) {
      const int c = d.div_lc.div(r);
      const int l = r - c * d.lc;
      const int cb = c * d.csp;
      Acc tv[GT], gv[GT];
      if (fast) {
        const Acc* tp = d.t + cb + swz(l * d.p + i0, d.sh);
        const Acc* gp = d.g + cb + swz(j0 * d.lc + l, d.sh);
        SK_KRON_UNROLL
        for (int a = 0; a < GT; ++a) tv[a] = tp[a];
        SK_KRON_UNROLL
        for (int b = 0; b < GT; ++b) gv[b] = gp[b * gstep];
      } else {
        SK_KRON_UNROLL
        for (int a = 0; a < GT; ++a) tv[a] = i0 + a < d.p ? d.t[cb + swz(l * d.p + i0 + a, d.sh)] : Acc(0);
        SK_KRON_UNROLL
        for (int b = 0; b < GT; ++b)
          gv[b] = j0 + b < d.q ? d.g[cb + swz((j0 + b) * d.lc + l, d.sh)] : Acc(0);
      }
      SK_KRON_UNROLL
      for (int a = 0; a < GT; ++a) {
        SK_KRON_UNROLL
        for (int b = 0; b < GT; ++b) acc[a][b] += tv[a] * gv[b];
      }
    }
    Acc* out = d.scratch + w * GT * GT;
    SK_KRON_UNROLL
    for (int a = 0; a < GT; ++a) {
      SK_KRON_UNROLL
      for (int b = 0; b < GT; ++b) out[a * GT + b] = acc[a][b];
    }
  }
}

/// Phase 2: sums the splits of every (i, j) and adds it to this block's partial sum in global
/// memory (`first`: the block's first tile, which overwrites instead).
template <typename Acc>
SK_KRON_FN void grad_reduce_thread(const GradDesc<Acc>& d, Acc* part, bool first, int tid, int nt) {
  constexpr int GT = kGradTile;
  const int tiles_j = (d.q + GT - 1) / GT;
  const int rs = grad_splits(d.p, d.q, nt);
  const int n = d.p * d.q;
  for (int e = tid; e < n; e += nt) {
    const int i = e / d.q, j = e - (e / d.q) * d.q;
    const int tile = (i / GT) * tiles_j + j / GT;
    const Acc* src = d.scratch + tile * rs * GT * GT + (i % GT) * GT + (j % GT);
    Acc sum = Acc(0);
    for (int sp = 0; sp < rs; ++sp) sum += src[sp * GT * GT];
    part[e] = first ? sum : part[e] + sum;
  }
}

// ------------------------------------------------------------------------------------------------
// Programs
// ------------------------------------------------------------------------------------------------

/// Forward of a fused group: per tile, load the chunks of X, apply the modes last to first in shared
/// memory (ping-pong between two buffers), store the chunks of Y.
template <class Ops, int RN, class Exec>
SK_KRON_PROGRAM void fused_forward_program(const FusedArgs& a, Exec& ex, typename Ops::Acc* sm,
                                           long long block, long long grid) {
  using Acc = typename Ops::Acc;
  const int nt = ex.nthreads();
  const int cbuf = a.tm * a.tl * a.csp;
  Acc* const buf0 = sm + a.off_buf;
  Acc* const buf1 = buf0 + cbuf;
  ex.phase([&](int tid) { load_factors<Ops>(a, sm, tid, nt); });
  for (long long tile = block; tile < a.ntiles; tile += grid) {
    const TileCoord tc = tile_at(a, tile);
    ex.phase([&](int tid) {
      load_contig<Ops>(a.x, a.ldx, a.vec_x, a, tc, buf0, a.s_in, a.div_s_in, tid, nt);
    });
    Acc* in = buf0;  // ping-pong by pointer swap (an indexed pair would live on the stack)
    Acc* out = buf1;
    for (int t = a.nf - 1; t >= 0; --t) {
      const StepDesc<Acc> sd = forward_step<Acc>(a, t, in, out, sm);
      ex.phase([&](int tid) { step_thread<Acc, RN>(sd, tid, nt); });
      Acc* const done = out;
      out = in;
      in = done;
    }
    const Acc* res = in;
    ex.phase([&](int tid) { store_strided<Ops>(a.y, a.ldy, a.vec_y, a, tc, res, a.s_out, tid, nt); });
  }
}

/// Backward of a fused group (see kron.h for the math). Per tile: load X's chunks and recompute
/// the forward states T_{b+1} … T_{a+1} into nf buffers; load G's chunks; then for each mode, in
/// forward order, add its ∂ℓ/∂F contribution and pull G back through it (two buffers); finally
/// store ∂ℓ/∂X. The grid is persistent: each block adds its tiles' ∂ℓ/∂F into its own partial sums
/// in global memory, which a reduction kernel adds up (deterministically) afterwards.
template <class Ops, int RN, class Exec>
SK_KRON_PROGRAM void fused_backward_program(const FusedArgs& a, Exec& ex, typename Ops::Acc* sm,
                                            long long block, long long grid) {
  using Acc = typename Ops::Acc;
  const int nt = ex.nthreads();
  const int cbuf = a.tm * a.tl * a.csp;
  const int nf = a.nf;
  Acc* tbuf0 = sm + a.off_buf;                // T buffer s at tbuf0 + s·cbuf, s < nf
  Acc* const gbuf0 = tbuf0 + nf * cbuf;
  Acc* const gbuf1 = gbuf0 + cbuf;
  Acc* scratch = sm + a.off_scratch;
  Acc* part = static_cast<Acc*>(a.partial) + block * a.part_stride;
  ex.phase([&](int tid) { load_factors<Ops>(a, sm, tid, nt); });
  for (long long tile = block; tile < a.ntiles; tile += grid) {
    const bool first = tile == block;
    const TileCoord tc = tile_at(a, tile);
    ex.phase([&](int tid) {
      load_contig<Ops>(a.x, a.ldx, a.vec_x, a, tc, tbuf0, a.s_in, a.div_s_in, tid, nt);
    });
    for (int s = 0; s + 1 < nf; ++s) {  // T buffer s holds the state before mode nf−1−s
      const StepDesc<Acc> sd = forward_step<Acc>(a, nf - 1 - s, tbuf0 + s * cbuf, tbuf0 + (s + 1) * cbuf, sm);
      ex.phase([&](int tid) { step_thread<Acc, RN>(sd, tid, nt); });
    }
    ex.phase([&](int tid) { load_strided<Ops>(a.g, a.ldg, a.vec_g, a, tc, gbuf0, a.s_out, tid, nt); });
    Acc* gin = gbuf0;
    Acc* gout = gbuf1;
    for (int t = 0; t < nf; ++t) {
      const FusedMode& md = a.mode[t];
      GradDesc<Acc> gd;
      gd.t = tbuf0 + (nf - 1 - t) * cbuf;
      gd.g = gin;
      gd.rows = a.tm * a.tl * md.lc;
      gd.lc = md.lc;
      gd.div_lc = md.div_lc;
      gd.p = md.p;
      gd.q = md.q;
      gd.csp = a.csp;
      gd.sh = a.sh;
      gd.scratch = scratch;
      ex.phase([&](int tid) { grad_tiles_thread<Acc>(gd, tid, nt); });
      Acc* mpart = part + md.part_off;
      ex.phase([&](int tid) { grad_reduce_thread<Acc>(gd, mpart, first, tid, nt); });
      if (t + 1 < nf || a.gx != nullptr) {
        const StepDesc<Acc> sd = reverse_step<Acc>(a, t, gin, gout, sm);
        ex.phase([&](int tid) { step_thread<Acc, RN>(sd, tid, nt); });
        Acc* const done = gout;
        gout = gin;
        gin = done;
      }
    }
    if (a.gx != nullptr) {
      const Acc* res = gin;
      ex.phase([&](int tid) {
        store_contig<Ops>(a.gx, a.ldgx, a.vec_gx, a, tc, res, a.s_in, a.div_s_in, tid, nt);
      });
    }
  }
}

}  // namespace sparsekern::kron::detail
