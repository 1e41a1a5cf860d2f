#pragma once
// Block-sparse tensor-core kernels built on CuTe's SM80 atoms: HMMA (mma.sync m16n8k16 for
// fp16/bf16, m16n8k8 for tf32) fed by ldmatrix from swizzled shared memory, with a multistage
// cp.async pipeline. The same path runs on sm_90 (Hopper executes mma.sync; wgmma is future work).
//
// Two kernel bodies share one mainloop and one epilogue:
//   dds: C (m × n) = A (m × k, dense) · Bop (k × n, block-sparse). A CTA owns a BM-row panel of A
//        and a BN-wide slice of one block column of Bop, and iterates only over the non-zero
//        blocks of that column (the column-wise index set of Bop). dsd is dds on the transposed
//        problem (the dispatcher swaps the operands and writes C column-major).
//   sdd: values[p] = (A · B)[block p]: a CTA owns a T × T tile of one block of the pattern and runs
//        a dense K loop over the two dense operands (or, split K, one range of it into fp32
//        partials that a second kernel sums; see TcParams).
//
// Compile time is a design constraint (CI builds every kernel on 2 cores). CuTe's layout algebra for
// TiledMMA / TiledCopy partitioning costs ~12 s of front-end time per instantiation, so the
// warp-level addressing is written out from the PTX fragment layouts (documented at each use and
// cross-checked against CuTe's MMA traits by tests/cpp/test_bsr_tc_emulation.cpp), while the
// instructions are CuTe's atoms and the shared-memory swizzle is CuTe's Swizzle. fp16 and bf16
// share one instantiation: they move identical 16-bit data; a run-time flag picks the MMA
// instruction and the output rounding.
//
// The bodies are host-device templates; only launch.cuh turns them into __global__ kernels. The
// host instantiation exists for the emulation test (see arch.cuh).

#include <cute/swizzle.hpp>

#include <cstdint>
#include <type_traits>

#include "arch.cuh"
#include "params.h"

namespace sparsekern::bsr::tc {

/// Which dim of an operand tile is contiguous in memory: K (the reduction dim) or M/N.
enum class Major { K, MN };

constexpr int log2_int(int x) { return x <= 1 ? 0 : 1 + log2_int(x / 2); }
constexpr int min_int(int a, int b) { return a < b ? a : b; }

/// One operand tile of kRows × kBK elements (rows = M for A, N for B) per pipeline stage.
///
/// Shared layout: the tile is a stack of "lines" along its contiguous dim (a line is a row of a
/// K-major tile, a k of an M/N-major tile), cut into panels of at most 128 bytes per line. Inside a
/// panel, the 16-byte chunk index of a line is XORed with the 128-byte-line index (CuTe's
/// Swizzle<B, M, 3>), so the 8 addresses of an ldmatrix phase, which are 8 consecutive lines at the
/// same chunk, hit 8 distinct bank groups, and cp.async writes of whole lines stay conflict-free.
///
/// 32-bit M/N-major tiles (tf32 operands whose contiguous dim is M or N) are the exception: ldmatrix
/// cannot transpose 32-bit elements, so their fragments are read by scalar loads in which lane
/// (g, t) reads line k0 + t, element c0 + g (c0 a multiple of 8): 4 lines × 8 consecutive floats per
/// load. Under the ldmatrix swizzle those land in 16 banks (2-way conflicts on every fragment load;
/// ncu, session 19). Their swizzle XORs chunk bits 1-2 with line bits 0-1 (Swizzle<2, 3, 2> for
/// 128-byte lines; Swizzle<1, 3, 2> for 64-byte lines, whose line bit 0 already picks the bank
/// half), which puts the four lines' 8-float runs in disjoint chunks: 32 banks, and whole-line
/// cp.async writes still cover each 128 bytes once.
template <class E, Major kMajor, int kRows, int kBK, int kThreads>
struct OperandTile {
  static constexpr int kElem = int(sizeof(E));
  static constexpr int kVec = 16 / kElem;  // elements per 16-byte vector
  static constexpr int kContig = kMajor == Major::K ? kBK : kRows;
  static constexpr int kLines = kMajor == Major::K ? kRows : kBK;
  static constexpr int kPanelW = kContig * kElem < 128 ? kContig : 128 / kElem;
  static constexpr int kStageElems = kRows * kBK;
  static constexpr bool kScalarReads = kElem == 4 && kMajor == Major::MN;
  static_assert(!kScalarReads || kPanelW == 16 || kPanelW == 32, "scalar-read tiles: 64- or 128-byte lines");
  using Swz = std::conditional_t<kScalarReads, cute::Swizzle<log2_int(kPanelW / 8), 3, 2>,
                                 cute::Swizzle<log2_int(kPanelW * kElem / 16), log2_int(kVec), 3>>;

  static_assert(kContig % kPanelW == 0 && kPanelW % kVec == 0, "panels hold whole vectors");
  static_assert(kLines % 8 == 0, "8 lines per swizzle period");

  /// Element offset of (line, c) inside one stage (c along the contiguous dim).
  CUTE_HOST_DEVICE static int offset(int line, int c) {
    return (c / kPanelW) * (kLines * kPanelW) + Swz{}(line * kPanelW + c % kPanelW);
  }
  /// Element offset of (row, k) inside one stage.
  CUTE_HOST_DEVICE static int at(int row, int k) {
    return kMajor == Major::K ? offset(row, k) : offset(k, row);
  }

  // Global→shared: 16-byte vectors along the contiguous dim, consecutive threads on consecutive
  // vectors (a warp reads whole 128-byte lines of global memory).
  static constexpr int kVecsPerLine = kContig / kVec;
  static constexpr int kVecs = kLines * kVecsPerLine;
  static constexpr int kIters = (kVecs + kThreads - 1) / kThreads;

  /// Issues the cp.async copies of the tile whose element (line, c) is at g[line·ld + c] into
  /// `stage` (kStageElems elements). With kPredLines, vectors of lines >= lines_valid are
  /// zero-filled and read nothing (their source is redirected to the tile origin, in bounds).
  template <bool kPredLines>
  CUTE_HOST_DEVICE static void load(const E* g, std::int64_t ld, E* stage, int tid,
                                    std::int64_t lines_valid) {
    CUTE_UNROLL
    for (int it = 0; it < kIters; ++it) {
      const int v = tid + it * kThreads;
      if (kVecs % kThreads != 0 && v >= kVecs) break;
      const int line = v / kVecsPerLine, c = (v % kVecsPerLine) * kVec;
      const bool pred = !kPredLines || line < lines_valid;
      const E* src = pred ? g + line * ld + c : g;
      CpAsync16::copy(*reinterpret_cast<const cute::uint128_t*>(src),
                      *reinterpret_cast<cute::uint128_t*>(stage + offset(line, c)), pred);
    }
  }
};

/// One kernel instantiation: element path (16-bit or tf32), CTA tile kBM × kBN × kBK, warp grid
/// kWM × kWN (each warp owns a contiguous (kBM/kWM) × (kBN/kWN) sub-tile), pipeline depth, and the
/// contiguous dim of each operand.
template <bool kTf32_, int kBM_, int kBN_, int kBK_, int kWM_, int kWN_, int kStages_,
          Major kAMajor_, Major kBMajor_>
struct KernelConfig {
  static constexpr bool kTf32 = kTf32_;
  using Element = std::conditional_t<kTf32, float, std::uint16_t>;  // raw storage
  static constexpr int kBM = kBM_, kBN = kBN_, kBK = kBK_, kStages = kStages_;
  static constexpr int kWM = kWM_, kWN = kWN_;
  static constexpr Major kAMajor = kAMajor_, kBMajor = kBMajor_;
  static constexpr int kThreads = 32 * kWM * kWN;
  static constexpr int kTM = kBM / kWM, kTN = kBN / kWN;  // warp tile
  static constexpr int kAtomK = kTf32 ? 8 : 16;           // k per mma instruction
  static constexpr int kMAtoms = kTM / 16, kNAtoms = kTN / 8;
  static constexpr int kKBlocks = kBK / kAtomK;  // MMA k-steps per stage
  using A = OperandTile<Element, kAMajor, kBM, kBK, kThreads>;
  using B = OperandTile<Element, kBMajor, kBN, kBK, kThreads>;

  static constexpr int kOutBytes = int(sizeof(Element));
  static constexpr int kOutVec = 16 / kOutBytes;  // output elements per 16-byte store
  static constexpr int kEpiStride = kBN + 4;      // fp32 staging row stride (+16 B: fewer conflicts)
  static constexpr std::size_t kPipeBytes =
      std::size_t(kStages) * (A::kStageElems + B::kStageElems) * sizeof(Element);
  static constexpr std::size_t kEpiBytes = std::size_t(kBM) * kEpiStride * sizeof(float);
  static constexpr std::size_t kSmemBytes = kPipeBytes > kEpiBytes ? kPipeBytes : kEpiBytes;

  static_assert(kTM % 16 == 0 && kTN % 16 == 0, "warp tiles are made of 16×16 steps");
  static_assert(kBK % kAtomK == 0 && (kKBlocks == 1 || kKBlocks % 2 == 0),
                "k-blocks are double-buffered by parity");
  static_assert(kStages >= 2, "a pipeline needs two stages");
};

/// The fragments of one MMA k-step of a warp: A for kMAtoms 16-row atoms, B for kNAtoms 8-column
/// atoms, as the registers of mma.sync (PTX ISA "Matrix Fragments for mma.m16n8k16 / m16n8k8").
template <class Cfg>
struct Fragments {
  std::uint32_t a[Cfg::kMAtoms][4];
  std::uint32_t b[Cfg::kNAtoms][2];
};

/// Loads the fragments of k-step `kb` of the warp at (m0, n0) from one stage of shared memory.
///
/// ldmatrix.x4: lanes 8i..8i+7 give the line addresses of 8×8 matrix i (8 lines of 16 bytes);
/// lane l receives register i = the 32-bit word (l/4, l%4) of matrix i (non-transposed), or the
/// two 16-bit elements (2(l%4), l/4), (2(l%4)+1, l/4) (.trans).
/// mma fragments (g = lane/4, t = lane%4; 16-bit; pairs of k in one register):
///   A 16×16: a0 (g, 2t), a1 (g+8, 2t), a2 (g, 2t+8), a3 (g+8, 2t+8)
///   B 16×8 : b0 (k=2t, n=g), b1 (k=2t+8, n=g)
/// tf32 m16n8k8 (one element per register): a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4);
///   b0 (k=t, n=g), b1 (k=t+4, n=g).
template <class Cfg>
CUTE_HOST_DEVICE void load_fragments(const typename Cfg::Element* sA, const typename Cfg::Element* sB,
                                     int kb, int lane, int m0, int n0, Fragments<Cfg>& f) {
  using A = typename Cfg::A;
  using B = typename Cfg::B;
  constexpr int kK = Cfg::kAtomK;
  const int g = lane / 4, t = lane % 4;
  // Which 8×8 matrix of an x4 load this lane addresses, and the line inside it.
  const int mat = lane / 8, row8 = lane % 8;

  if constexpr (Cfg::kAMajor == Major::K) {
    // 16-bit: matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15)
    // = a0..a3. tf32: the same with k in units of 4 (16 bytes).
    CUTE_UNROLL
    for (int i = 0; i < Cfg::kMAtoms; ++i) {
      const int row = m0 + i * 16 + (mat % 2) * 8 + row8;
      const int k = kb * kK + (mat / 2) * (kK / 2);
      Ldsm4<false>::copy(*reinterpret_cast<const cute::uint128_t*>(sA + A::at(row, k)),
                         f.a[i][0], f.a[i][1], f.a[i][2], f.a[i][3]);
    }
  } else if constexpr (!Cfg::kTf32) {
    // M-major, transposed loads: matrices (k 0-7, m 0-7), (k 0-7, m 8-15), (k 8-15, m 0-7),
    // (k 8-15, m 8-15) = a0..a3.
    CUTE_UNROLL
    for (int i = 0; i < Cfg::kMAtoms; ++i) {
      const int k = kb * kK + (mat / 2) * 8 + row8;
      const int row = m0 + i * 16 + (mat % 2) * 8;
      Ldsm4<true>::copy(*reinterpret_cast<const cute::uint128_t*>(sA + A::at(row, k)),
                        f.a[i][0], f.a[i][1], f.a[i][2], f.a[i][3]);
    }
  } else {
    // tf32 M-major: ldmatrix cannot transpose 32-bit elements; 32-bit shared loads (conflict-free
    // with this tile's swizzle, see OperandTile).
    CUTE_UNROLL
    for (int i = 0; i < Cfg::kMAtoms; ++i) {
      const int row = m0 + i * 16 + g, k = kb * kK + t;
      const std::uint32_t* s = reinterpret_cast<const std::uint32_t*>(sA);
      f.a[i][0] = lds32(s + A::at(row, k));
      f.a[i][1] = lds32(s + A::at(row + 8, k));
      f.a[i][2] = lds32(s + A::at(row, k + 4));
      f.a[i][3] = lds32(s + A::at(row + 8, k + 4));
    }
  }

  if constexpr (Cfg::kBMajor == Major::K) {
    // Two 8-column atoms per x4: matrices (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7),
    // (n 8-15, k 8-15) = b0, b1 of atom 2j, then b0, b1 of atom 2j+1 (tf32: k in units of 4).
    CUTE_UNROLL
    for (int j = 0; j < Cfg::kNAtoms / 2; ++j) {
      const int n = n0 + j * 16 + (mat / 2) * 8 + row8;
      const int k = kb * kK + (mat % 2) * (kK / 2);
      Ldsm4<false>::copy(*reinterpret_cast<const cute::uint128_t*>(sB + B::at(n, k)),
                         f.b[2 * j][0], f.b[2 * j][1], f.b[2 * j + 1][0], f.b[2 * j + 1][1]);
    }
  } else if constexpr (!Cfg::kTf32) {
    // N-major, transposed loads: matrices (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15),
    // (k 8-15, n 8-15) = b0, b1 of atom 2j, then of atom 2j+1.
    CUTE_UNROLL
    for (int j = 0; j < Cfg::kNAtoms / 2; ++j) {
      const int k = kb * kK + (mat % 2) * 8 + row8;
      const int n = n0 + j * 16 + (mat / 2) * 8;
      Ldsm4<true>::copy(*reinterpret_cast<const cute::uint128_t*>(sB + B::at(n, k)),
                        f.b[2 * j][0], f.b[2 * j][1], f.b[2 * j + 1][0], f.b[2 * j + 1][1]);
    }
  } else {
    CUTE_UNROLL
    for (int j = 0; j < Cfg::kNAtoms; ++j) {
      const int n = n0 + j * 8 + g, k = kb * kK + t;
      const std::uint32_t* s = reinterpret_cast<const std::uint32_t*>(sB);
      f.b[j][0] = lds32(s + B::at(n, k));
      f.b[j][1] = lds32(s + B::at(n, k + 4));
    }
  }
}

/// Accumulators of one warp: kMAtoms × kNAtoms atoms of 16×8, 4 fp32 each: c0 (g, 2t),
/// c1 (g, 2t+1), c2 (g+8, 2t), c3 (g+8, 2t+1).
template <class Cfg>
struct Accumulators {
  float c[Cfg::kMAtoms][Cfg::kNAtoms][4];
};

template <class Op, class Cfg>
CUTE_HOST_DEVICE void mma_step(const Fragments<Cfg>& f, Accumulators<Cfg>& acc) {
  CUTE_UNROLL
  for (int i = 0; i < Cfg::kMAtoms; ++i) {
    CUTE_UNROLL
    for (int j = 0; j < Cfg::kNAtoms; ++j) {
      float* c = acc.c[i][j];
      Op::fma(c[0], c[1], c[2], c[3], f.a[i][0], f.a[i][1], f.a[i][2], f.a[i][3], f.b[j][0],
              f.b[j][1], c[0], c[1], c[2], c[3]);
    }
  }
}

/// Output conversion: fp32 → fp16 / bf16 bits (round to nearest even), and back for the bias.
CUTE_HOST_DEVICE std::uint16_t to_half_bits(float x, bool bf16) {
  return bf16 ? cute::bfloat16_t(x).raw() : cute::half_t(x).raw();
}
CUTE_HOST_DEVICE float from_half_bits(std::uint16_t x, bool bf16) {
  return bf16 ? float(cute::bfloat16_t::bitcast(x)) : float(cute::half_t::bitcast(x));
}

/// Per-lane sums of the A rows a warp's fragments hold (the fused row sums of the sdd): lane (g, t)
/// holds rows g and g + 8 of each 16-row atom at k ≡ t (mod 4) (tf32: a0 / a2 and a1 / a3, one
/// element each) or k ∈ {2t, 2t + 1} (mod 8) (16-bit: two elements per register), so rs[i][h]
/// gathers row g + 8h of atom i over the lane's share of every k-step.
template <class Cfg>
struct RowSums {
  float r[Cfg::kMAtoms][2];
};

template <class Cfg, bool kBf16>
CUTE_HOST_DEVICE void row_sum_step(const Fragments<Cfg>& f, RowSums<Cfg>& rs) {
  CUTE_UNROLL
  for (int i = 0; i < Cfg::kMAtoms; ++i) {
    CUTE_UNROLL
    for (int h = 0; h < 2; ++h) {
      const std::uint32_t lo = f.a[i][h], hi = f.a[i][h + 2];  // k and k + 4 (tf32) / k + 8 (16-bit)
      if constexpr (Cfg::kTf32) {
        rs.r[i][h] += bits_float(lo) + bits_float(hi);
      } else {
        rs.r[i][h] += (from_half_bits(std::uint16_t(lo & 0xffff), kBf16) + from_half_bits(std::uint16_t(lo >> 16), kBf16)) +
                      (from_half_bits(std::uint16_t(hi & 0xffff), kBf16) + from_half_bits(std::uint16_t(hi >> 16), kBf16));
      }
    }
  }
}

/// The pipelined mainloop: acc += Σ over the tiles of `src` of A_tile · B_tileᵀ. `src` hands out
/// the tiles in order (src.load(sA_stage, sB_stage, tid) issues the copies of the next tile).
/// CUTLASS's SM80 multistage structure: kStages-1 tiles in flight while one is consumed, and the
/// shared→register loads of k-step j+1 overlapped with the MMAs of k-step j.
template <class Cfg, bool kBf16, bool kRowSums, class Source>
CUTE_HOST_DEVICE void mainloop(Source& src, Accumulators<Cfg>& acc, int tid, char* smem, RowSums<Cfg>* rs) {
  using E = typename Cfg::Element;
  constexpr int kStages = Cfg::kStages, kKBlocks = Cfg::kKBlocks;
  constexpr int kAStage = Cfg::A::kStageElems, kBStage = Cfg::B::kStageElems;
  E* smem_a = reinterpret_cast<E*>(smem);
  E* smem_b = smem_a + kStages * kAStage;

  const int warp = tid / 32, lane = tid % 32;
  const int m0 = (warp / Cfg::kWN) * Cfg::kTM, n0 = (warp % Cfg::kWN) * Cfg::kTN;

  const int k_tiles = src.count();
  int k_tile_next = 0;  // next tile to fetch from global memory

  // Prologue: put kStages-1 tiles in flight (empty commit groups past the end keep the group
  // arithmetic of cp_async_wait the same for short tile lists).
  CUTE_UNROLL
  for (int stage = 0; stage < kStages - 1; ++stage) {
    if (k_tile_next < k_tiles) src.load(smem_a + stage * kAStage, smem_b + stage * kBStage, tid);
    ++k_tile_next;
    cp_async_fence();
  }

  int smem_read = 0;
  int smem_write = kStages - 1;
  const E* sA = smem_a;  // stage being read
  const E* sB = smem_b;
  Fragments<Cfg> frag[2];  // double buffer, indexed by k-step parity

  if constexpr (kKBlocks > 1) {
    cp_async_wait<kStages - 2>();
    sync_threads();
    load_fragments<Cfg>(sA, sB, 0, lane, m0, n0, frag[0]);
  }

  CUTE_NO_UNROLL
  for (int k_tile = 0; k_tile < k_tiles; ++k_tile) {
    CUTE_UNROLL
    for (int kb = 0; kb < kKBlocks; ++kb) {
      if (kb == kKBlocks - 1) {
        // Move to the next tile's stage: wait for its copies, and for every thread to finish
        // reading the stage that the copy issued below (next iteration) will overwrite.
        sA = smem_a + smem_read * kAStage;
        sB = smem_b + smem_read * kBStage;
        cp_async_wait<kStages - 2>();
        sync_threads();
      }
      const int kb_next = kb + 1 == kKBlocks ? 0 : kb + 1;
      load_fragments<Cfg>(sA, sB, kb_next, lane, m0, n0, frag[kb_next & 1]);
      if (kb == 0) {
        if (k_tile_next < k_tiles)
          src.load(smem_a + smem_write * kAStage, smem_b + smem_write * kBStage, tid);
        ++k_tile_next;
        cp_async_fence();
        smem_write = smem_read;
        smem_read = smem_read + 1 == kStages ? 0 : smem_read + 1;
      }
      if constexpr (Cfg::kTf32) {
        mma_step<Mma1688Tf32>(frag[kb & 1], acc);
      } else {
        mma_step<Mma16816<kBf16>>(frag[kb & 1], acc);
      }
      if constexpr (kRowSums) row_sum_step<Cfg, kBf16>(frag[kb & 1], *rs);
    }
  }
  cp_async_wait<0>();
  sync_threads();  // shared memory is reused by the epilogue
}

/// fp16 and bf16 share an instantiation; the mainloop is specialised per MMA instruction (a
/// uniform branch per MMA would keep both paths' registers live: +30 registers at 128×64).
/// kRowSums: also the A fragments' row sums into *rs (a separate instantiation, so the plain loop
/// keeps its registers).
template <class Cfg, bool kRowSums = false, class Source>
CUTE_HOST_DEVICE void run_mainloop(Source& src, Accumulators<Cfg>& acc, int tid, char* smem,
                                   bool bf16, RowSums<Cfg>* rs = nullptr) {
  if (!Cfg::kTf32 && bf16) {
    mainloop<Cfg, true, kRowSums>(src, acc, tid, smem, rs);
  } else {
    mainloop<Cfg, false, kRowSums>(src, acc, tid, smem, rs);
  }
}

template <class Cfg>
CUTE_HOST_DEVICE float load_out(const void* p, std::int64_t i, bool bf16) {
  if constexpr (Cfg::kTf32) {
    return static_cast<const float*>(p)[i];
  } else {
    return from_half_bits(static_cast<const std::uint16_t*>(p)[i], bf16);
  }
}

template <class Cfg>
CUTE_HOST_DEVICE void store_out(void* p, std::int64_t i, float v, bool bf16) {
  if constexpr (Cfg::kTf32) {
    static_cast<float*>(p)[i] = v;
  } else {
    static_cast<std::uint16_t*>(p)[i] = to_half_bits(v, bf16);
  }
}

/// Writes kOutVec consecutive outputs to `dst` with one 16-byte store.
template <class Cfg>
CUTE_HOST_DEVICE void store_vec(void* dst, const float* v, bool bf16) {
  std::uint32_t w[4];
  if constexpr (Cfg::kTf32) {
    CUTE_UNROLL
    for (int i = 0; i < 4; ++i) w[i] = float_bits(v[i]);
  } else {
    CUTE_UNROLL
    for (int i = 0; i < 4; ++i)
      w[i] = std::uint32_t(to_half_bits(v[2 * i], bf16)) |
             (std::uint32_t(to_half_bits(v[2 * i + 1], bf16)) << 16);
  }
  note_global_store_16(dst);
  *reinterpret_cast<uint4*>(dst) = uint4{w[0], w[1], w[2], w[3]};
}

/// The first half of the epilogue: the accumulators into shared memory as an fp32 kBM × kBN tile
/// (row stride kEpiStride), then a barrier.
template <class Cfg>
CUTE_HOST_DEVICE void epilogue_stage(const Accumulators<Cfg>& acc, int tid, char* smem) {
  constexpr int kStride = Cfg::kEpiStride;
  float* s = reinterpret_cast<float*>(smem);
  const int warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int m0 = (warp / Cfg::kWN) * Cfg::kTM, n0 = (warp % Cfg::kWN) * Cfg::kTN;
  CUTE_UNROLL
  for (int i = 0; i < Cfg::kMAtoms; ++i) {
    CUTE_UNROLL
    for (int j = 0; j < Cfg::kNAtoms; ++j) {
      float* p = s + (m0 + i * 16 + g) * kStride + n0 + j * 8 + 2 * t;
      p[0] = acc.c[i][j][0];
      p[1] = acc.c[i][j][1];
      p[8 * kStride] = acc.c[i][j][2];
      p[8 * kStride + 1] = acc.c[i][j][3];
    }
  }
  sync_threads();
}

/// Writes the accumulators (plus an optional bias per column) to the C tile through shared memory
/// (fp32), so global stores are 16-byte vectors along C's contiguous dim. C(r, c) is element
/// r·ldc + c (row-major) or r + c·ldc (col_major) of `c_tile`; rows r >= rows_valid are skipped.
/// `bias` (or null) points at the bias of the tile's first column.
template <class Cfg>
CUTE_HOST_DEVICE void epilogue(const Accumulators<Cfg>& acc, int tid, char* smem, void* c_tile,
                               std::int64_t ldc, bool col_major, std::int64_t rows_valid,
                               const void* bias, bool bf16) {
  constexpr int kBM = Cfg::kBM, kBN = Cfg::kBN, kVec = Cfg::kOutVec, kStride = Cfg::kEpiStride;
  const float* s = reinterpret_cast<const float*>(smem);
  epilogue_stage<Cfg>(acc, tid, smem);

  char* c_bytes = static_cast<char*>(c_tile);
  float v[kVec];
  if (!col_major) {
    // Consecutive threads on consecutive vectors of a row: coalesced 16-byte stores.
    constexpr int kVecsPerRow = kBN / kVec;
    for (int i = tid; i < kBM * kVecsPerRow; i += Cfg::kThreads) {
      const int r = i / kVecsPerRow, c = (i % kVecsPerRow) * kVec;
      if (r >= rows_valid) break;  // r only grows with i
      CUTE_UNROLL
      for (int e = 0; e < kVec; ++e) {
        v[e] = s[r * kStride + c + e];
        if (bias != nullptr) v[e] += load_out<Cfg>(bias, c + e, bf16);
      }
      store_vec<Cfg>(c_bytes + (r * ldc + c) * Cfg::kOutBytes, v, bf16);
    }
  } else {
    // Consecutive threads on consecutive columns (conflict-free shared reads); each thread packs
    // kVec consecutive rows of one column into a 16-byte store.
    for (int i = tid; i < kBN * (kBM / kVec); i += Cfg::kThreads) {
      const int c = i % kBN, r = (i / kBN) * kVec;
      if (r >= rows_valid) break;
      const float bias_c = bias != nullptr ? load_out<Cfg>(bias, c, bf16) : 0.f;
      CUTE_UNROLL
      for (int e = 0; e < kVec; ++e) v[e] = s[(r + e) * kStride + c] + bias_c;
      char* dst = c_bytes + (c * ldc + r) * Cfg::kOutBytes;
      if (r + kVec <= rows_valid) {
        store_vec<Cfg>(dst, v, bf16);
      } else {
        CUTE_UNROLL
        for (int e = 0; e < kVec; ++e)
          if (r + e < rows_valid) store_out<Cfg>(dst, e, v[e], bf16);
      }
    }
  }
}

/// Tiles of one dds CTA, in order: for each non-zero block of the CTA's block column of Bop, the
/// b/BK K-slices of that block. The indices of the next non-zero block are fetched one block
/// ahead, so their global-load latency hides behind a tile of MMAs.
template <class Cfg, bool kBKMajor>
struct DdsTiles {
  using E = typename Cfg::Element;
  static constexpr int kBK = Cfg::kBK;

  const E* a;  // row m0 of A
  std::int64_t lda;
  std::int64_t rows_valid;
  const E* values;
  const std::int32_t* indices;
  const std::int32_t* value_index;
  int b, n_off, subs, sub, e, e_end, tiles;
  int kb, vi, kb_next, vi_next;

  CUTE_HOST_DEVICE DdsTiles(const TcParams& p, int j, int n_off_, std::int64_t m0)
      : a(static_cast<const E*>(p.a) + m0 * p.lda),
        lda(p.lda),
        rows_valid(p.m - m0),
        values(static_cast<const E*>(p.values)),
        indices(p.indices),
        value_index(p.value_index),
        b(p.block),
        n_off(n_off_),
        subs(p.block / kBK),
        sub(0),
        e(p.offsets[j]),
        e_end(p.offsets[j + 1]),
        kb(0), vi(0), kb_next(0), vi_next(0) {
    tiles = (e_end - e) * subs;
    if (e < e_end) fetch(e, kb, vi);
    if (e + 1 < e_end) fetch(e + 1, kb_next, vi_next);
  }

  CUTE_HOST_DEVICE void fetch(int entry, int& k_block, int& value) const {
    k_block = indices[entry];
    value = value_index != nullptr ? value_index[entry] : entry;
  }

  CUTE_HOST_DEVICE int count() const { return tiles; }

  CUTE_HOST_DEVICE void load(E* sA, E* sB, int tid) {
    // A: K-major, lines = rows of the panel (predicated on m).
    Cfg::A::template load<true>(a + std::int64_t(kb) * b + sub * kBK, lda, sA, tid, rows_valid);
    const E* block = values + std::int64_t(vi) * b * b;
    if constexpr (kBKMajor) {  // Bop = Sᵀ: Bop(k, n) = block(n, k): lines are n, contiguous k
      Cfg::B::template load<false>(block + n_off * b + sub * kBK, b, sB, tid, 0);
    } else {  // Bop = S: Bop(k, n) = block(k, n): lines are k, contiguous n
      Cfg::B::template load<false>(block + sub * kBK * b + n_off, b, sB, tid, 0);
    }
    if (++sub == subs) {
      sub = 0;
      ++e;
      kb = kb_next;
      vi = vi_next;
      if (e + 1 < e_end) fetch(e + 1, kb_next, vi_next);
    }
  }
};

/// Tiles of one sdd CTA: the K-slices of the tile's row panel of A (M-major: lines are k) and
/// column panel of B (N-major: lines are k); lines past k are zero-filled.
template <class Cfg>
struct SddTiles {
  using E = typename Cfg::Element;
  static constexpr int kBK = Cfg::kBK;
  const E* a;
  std::int64_t lda;
  const E* b;
  std::int64_t ldb;
  int k, k0;

  CUTE_HOST_DEVICE int count() const { return (k - k0 + kBK - 1) / kBK; }  // from the first k0

  CUTE_HOST_DEVICE void load(E* sA, E* sB, int tid) {
    Cfg::A::template load<true>(a + k0 * lda, lda, sA, tid, k - k0);
    Cfg::B::template load<true>(b + k0 * ldb, ldb, sB, tid, k - k0);
    k0 += kBK;
  }
};

/// dds CTA (tile_n, tile_m): rows [BM·tile_m, +BM) of C, columns [j·b + n_off, +BN) where
/// j = tile_n / (b/BN) is the block column of Bop.
template <class Cfg, bool kBKMajor>
CUTE_HOST_DEVICE void dds_body(const TcParams& p, int tid, int tile_n, int tile_m, char* smem) {
  const int nsub = p.block / Cfg::kBN;
  const int j = tile_n / nsub;
  const int n_off = (tile_n % nsub) * Cfg::kBN;
  const std::int64_t m0 = std::int64_t(tile_m) * Cfg::kBM;

  Accumulators<Cfg> acc{};
  DdsTiles<Cfg, kBKMajor> tiles(p, j, n_off, m0);
  run_mainloop<Cfg>(tiles, acc, tid, smem, p.bf16);

  const std::int64_t n0 = std::int64_t(j) * p.block + n_off;
  char* c_tile = static_cast<char*>(p.c) +
                 (p.c_col_major ? m0 + n0 * p.ldc : m0 * p.ldc + n0) * Cfg::kOutBytes;
  const void* bias =
      p.bias != nullptr ? static_cast<const char*>(p.bias) + n0 * Cfg::kOutBytes : nullptr;
  epilogue<Cfg>(acc, tid, smem, c_tile, p.ldc, p.c_col_major, p.m - m0, bias, p.bf16);
}

/// Writes the accumulators as an fp32 kBM × kBN tile, row stride ld (in floats), through shared
/// memory: 16-byte stores along rows. The split-K sdd's partials.
template <class Cfg>
CUTE_HOST_DEVICE void epilogue_f32(const Accumulators<Cfg>& acc, int tid, char* smem, float* c_tile,
                                   std::int64_t ld) {
  constexpr int kStride = Cfg::kEpiStride, kVecsPerRow = Cfg::kBN / 4;
  epilogue_stage<Cfg>(acc, tid, smem);
  const float* s = reinterpret_cast<const float*>(smem);
  for (int i = tid; i < Cfg::kBM * kVecsPerRow; i += Cfg::kThreads) {
    const int r = i / kVecsPerRow, c = (i % kVecsPerRow) * 4;
    const float* v = s + r * kStride + c;
    float* dst = c_tile + r * ld + c;
    note_global_store_16(dst);
    *reinterpret_cast<float4*>(dst) = float4{v[0], v[1], v[2], v[3]};
  }
}

/// sdd CTA: tile `sub` (row-major among the (b/T)² tiles of a block) of block `blk`, and with
/// p.splits > 1 one split of its K loop (CTA = (blk · (b/T)² + sub) · splits + split; see TcParams).
template <class Cfg, bool kRowSums = false>
CUTE_HOST_DEVICE void sdd_body(const TcParams& p, int tid, int cta, char* smem) {
  using E = typename Cfg::Element;
  static_assert(Cfg::kBM == Cfg::kBN, "sdd tiles are square");
  constexpr int kT = Cfg::kBM;
  const int splits = p.splits > 1 ? p.splits : 1;
  const int split = cta % splits;
  cta /= splits;
  const int b = p.block;
  const int nsub = b / kT;
  const int blk = cta / (nsub * nsub);
  const int sub = cta % (nsub * nsub);
  const int m_off = (sub / nsub) * kT, n_off = (sub % nsub) * kT;
  const std::int64_t row0 = std::int64_t(p.block_rows[blk]) * b + m_off;
  const std::int64_t col0 = std::int64_t(p.block_cols[blk]) * b + n_off;
  int k_begin = 0, k_end = p.k;
  if (splits > 1) {  // k-steps of this split, clipped to K (a split past the end adds zeros)
    const std::int64_t span = std::int64_t(p.split_steps) * Cfg::kBK;
    k_begin = int(std::int64_t(split) * span < p.k ? std::int64_t(split) * span : p.k);
    k_end = int(k_begin + span < p.k ? k_begin + span : p.k);
  }

  Accumulators<Cfg> acc{};
  SddTiles<Cfg> tiles{static_cast<const E*>(p.a) + row0, p.lda, static_cast<const E*>(p.b) + col0,
                      p.ldb, k_end, k_begin};
  // The fused row sums (TcParams::row_partial; kRowSums: a separate instantiation, so that the
  // kernel without them keeps its registers): the block row's first block, first tile column.
  bool row_sums = false;
  if constexpr (kRowSums) row_sums = n_off == 0 && blk == p.block_row_offsets[p.block_rows[blk]];
  if (!row_sums) {
    run_mainloop<Cfg>(tiles, acc, tid, smem, p.bf16);
  } else if constexpr (kRowSums) {
    RowSums<Cfg> rs{};
    run_mainloop<Cfg, true>(tiles, acc, tid, smem, p.bf16, &rs);
    const int warp = tid / 32, lane = tid % 32;
    if (warp % Cfg::kWN == 0) {  // warp column 0 (the other columns hold the same A fragments)
      const std::int64_t r0 = row0 + (warp / Cfg::kWN) * Cfg::kTM + lane / 4;
      float* const dst = p.row_partial + (std::int64_t(split) * p.row_stride + r0) * 4 + lane % 4;
      CUTE_UNROLL
      for (int i = 0; i < Cfg::kMAtoms; ++i) {
        dst[(i * 16) * 4] = rs.r[i][0];
        dst[(i * 16 + 8) * 4] = rs.r[i][1];
      }
    }
  }

  const std::int64_t at = std::int64_t(blk) * b * b + std::int64_t(m_off) * b + n_off;
  if (splits > 1) {
    epilogue_f32<Cfg>(acc, tid, smem, p.partial + std::int64_t(split) * p.nnz * b * b + at, b);
    return;
  }
  char* out = static_cast<char*>(p.out_values) + at * Cfg::kOutBytes;
  epilogue<Cfg>(acc, tid, smem, out, b, false, kT, nullptr, p.bf16);
}

/// out[i] = Σ_s partial[s · count + i] in split order, rounded to the output type (fp32 for the
/// tf32 path, else fp16 / bf16 by `bf16`), for i in [i0, i1) (multiples of 4): the second half of
/// a split-K sdd, `count` = nnz · b². Vectors of four.
template <bool kTf32>
CUTE_HOST_DEVICE void sdd_split_reduce_range(const float* partial, int splits, std::int64_t count, void* out,
                                             bool bf16, std::int64_t i0, std::int64_t i1) {
  for (std::int64_t i = i0; i < i1; i += 4) {
    float4 v = *reinterpret_cast<const float4*>(partial + i);
    for (int s = 1; s < splits; ++s) {
      const float4 w = *reinterpret_cast<const float4*>(partial + std::int64_t(s) * count + i);
      v.x += w.x;
      v.y += w.y;
      v.z += w.z;
      v.w += w.w;
    }
    if constexpr (kTf32) {
      *reinterpret_cast<float4*>(static_cast<float*>(out) + i) = v;
    } else {
      const std::uint32_t lo = std::uint32_t(to_half_bits(v.x, bf16)) | (std::uint32_t(to_half_bits(v.y, bf16)) << 16);
      const std::uint32_t hi = std::uint32_t(to_half_bits(v.z, bf16)) | (std::uint32_t(to_half_bits(v.w, bf16)) << 16);
      *reinterpret_cast<uint2*>(static_cast<std::uint16_t*>(out) + i) = uint2{lo, hi};
    }
  }
}

/// Grouped sdd (sdd_group_body): the CTA's output tile is kG segments of kT columns side by side,
/// each a kT × kT tile of one block (blocks of one block row, so they share the A rows), with
/// kBN = kG · kT. Segments past the group's are zero-filled and not stored.
template <class Cfg, int kT, int kG>
struct SddGroupTiles {
  using E = typename Cfg::Element;
  using B = typename Cfg::B;
  static constexpr int kBK = Cfg::kBK;
  static_assert(Cfg::kBN == kG * kT && kT % B::kVec == 0, "segments hold whole vectors");
  const E* a;
  std::int64_t lda;
  const E* b;              // B at its first row
  std::int64_t ldb;
  std::int64_t col[kG];    // first column of each segment in B
  int segs;                // segments present (1 … kG)
  int k, k0;

  /// col[seg] through selects (a run-time index into col would put the array in local memory).
  CUTE_HOST_DEVICE std::int64_t seg_col(int seg) const {
    std::int64_t r = col[0];
    CUTE_UNROLL
    for (int i = 1; i < kG; ++i) r = seg == i ? col[i] : r;
    return r;
  }

  CUTE_HOST_DEVICE int count() const { return (k + kBK - 1) / kBK; }

  CUTE_HOST_DEVICE void load(E* sA, E* sB, int tid) {
    Cfg::A::template load<true>(a + k0 * lda, lda, sA, tid, k - k0);
    // B as OperandTile::load (lines are k, 16-byte vectors along n), each vector from its segment.
    const int lines_valid = k - k0;
    const E* bk = b + k0 * ldb;
    CUTE_UNROLL
    for (int it = 0; it < B::kIters; ++it) {
      const int v = tid + it * Cfg::kThreads;
      if (B::kVecs % Cfg::kThreads != 0 && v >= B::kVecs) break;
      const int line = v / B::kVecsPerLine, c = (v % B::kVecsPerLine) * B::kVec;
      const int seg = c / kT;
      const bool pred = line < lines_valid && seg < segs;
      const E* src = pred ? bk + line * ldb + seg_col(seg) + (c - seg * kT) : b;
      CpAsync16::copy(*reinterpret_cast<const cute::uint128_t*>(src),
                      *reinterpret_cast<cute::uint128_t*>(sB + B::offset(line, c)), pred);
    }
    k0 += kBK;
  }
};

/// Grouped sdd CTA. With S = b / kT sub-tiles per block side, CTA `cta` takes sub-row cta % S of
/// block p = cta / S; its group is the blocks from p on within the same block row and the same
/// aligned chunk of kG / S consecutive blocks (the pattern's coordinate list is in BSR order), each
/// contributing its S sub-columns as segments. Only a chunk's first block of each block row leads
/// a group; the CTAs of the other blocks leave at once. So blocks of one row share each k-slice of
/// A (the sampled product's L2 → shared-memory traffic per FLOP falls from 2/kT to (1 + kG)/(kG · kT)
/// per row of output) without any index preprocessing.
template <class Cfg, int kT, int kG>
CUTE_HOST_DEVICE void sdd_group_body(const TcParams& p, int tid, int cta, char* smem) {
  using E = typename Cfg::Element;
  static_assert(Cfg::kBM == kT, "a group's rows are one sub-row of a block");
  const int b = p.block;
  const int S = b / kT;
  const int per = kG / S;  // blocks per chunk
  const int blk = cta / S;
  const int m_off = (cta % S) * kT;
  const int row = p.block_rows[blk];
  if (blk % per != 0 && p.block_rows[blk - 1] == row) return;  // not a group's first block
  int nb = 1;
  while (nb < per && (blk + nb) % per != 0 && blk + nb < p.nnz && p.block_rows[blk + nb] == row) ++nb;

  SddGroupTiles<Cfg, kT, kG> tiles;
  tiles.a = static_cast<const E*>(p.a) + std::int64_t(row) * b + m_off;
  tiles.lda = p.lda;
  tiles.b = static_cast<const E*>(p.b);
  tiles.ldb = p.ldb;
  tiles.segs = nb * S;
  CUTE_UNROLL
  for (int sg = 0; sg < kG; ++sg) {
    const int j = sg / S < nb ? sg / S : 0;
    tiles.col[sg] = std::int64_t(p.block_cols[blk + j]) * b + (sg % S) * kT;
  }
  tiles.k = p.k;
  tiles.k0 = 0;
  Accumulators<Cfg> acc{};
  run_mainloop<Cfg>(tiles, acc, tid, smem, p.bf16);

  // Epilogue: segment sg is rows m_off … of sub-column (sg % S) of block blk + sg / S.
  epilogue_stage<Cfg>(acc, tid, smem);
  const float* s = reinterpret_cast<const float*>(smem);
  constexpr int kVec = Cfg::kOutVec, kVecsPerRow = Cfg::kBN / kVec;
  char* out = static_cast<char*>(p.out_values);
  float v[kVec];
  for (int i = tid; i < kT * kVecsPerRow; i += Cfg::kThreads) {
    const int r = i / kVecsPerRow, c = (i % kVecsPerRow) * kVec;
    const int sg = c / kT;
    if (sg >= tiles.segs) continue;
    CUTE_UNROLL
    for (int e = 0; e < kVec; ++e) v[e] = s[r * Cfg::kEpiStride + c + e];
    const std::int64_t at = (std::int64_t(blk + sg / S) * b + m_off + r) * b + (sg % S) * kT + (c - sg * kT);
    store_vec<Cfg>(out + at * Cfg::kOutBytes, v, p.bf16);
  }
}

}  // namespace sparsekern::bsr::tc
