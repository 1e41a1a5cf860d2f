// CPU backend of the Kronecker products. Its own plan makes every mode one GEMM step, run by the
// packed, register-tiled CPU GEMM (src/common/cpu_gemm.h). With SPARSEKERN_KRON_CPU=emulate (the
// tests' setting) it plans for a virtual GPU instead, and fused groups run the GPU block programs
// (kron_tile.h, kron_fast.h, kron_small.h, ...) with the threads of a block executed one after
// another between barriers (OpenMP across blocks), so the CPU tests also check the GPU kernels'
// tiling and index arithmetic.
#include <cmath>
#include <cstdlib>
#include <string>
#include <limits>
#include <vector>

#include "../common/cpu_gemm.h"
#include "../common/dispatch.h"
#include "../common/thread_scratch.h"
#include "kron_fast.h"
#include "kron_fast_bwd.h"
#include "kron_head.h"
#include "kron_small.h"
#include "kron_small_bwd.h"
#include "kron_internal.h"
#include "kron_tile.h"

namespace sparsekern::kron::detail {
namespace {

using sparsekern::detail::acc_type;
using sparsekern::detail::PerThread;
using sparsekern::detail::ThreadScratch;

template <typename TT>
struct HostOps {
  using T = TT;
  using Acc = typename acc_type<TT>::type;
  static constexpr int V = static_cast<int>(16 / sizeof(TT));
  static Acc to_acc(T v) { return static_cast<Acc>(v); }
  static T from_acc(Acc v) { return T(v); }
  static void load_vec(const T* p, Acc* out) {
    for (int k = 0; k < V; ++k) out[k] = to_acc(p[k]);
  }
  static void store_vec(T* p, const Acc* v) {
    for (int k = 0; k < V; ++k) p[k] = from_acc(v[k]);
  }
};

/// Runs each phase for threads 0 … kThreads−1 in turn: the barrier between phases is implicit.
struct HostExec {
  int nthreads() const { return kThreads; }
  template <class F>
  void phase(F&& f) {
    for (int t = 0; t < kThreads; ++t) f(t);
  }
};

/// Shared memory of one emulated block, filled with NaN before each block (when cheap) so that a
/// program reading a location it never wrote poisons its output and fails the tests.
template <typename Acc>
void poison(Acc* sm, std::size_t n) {
  std::fill(sm, sm + n, std::numeric_limits<Acc>::quiet_NaN());
}

template <class Ops, int RN>
void run_fused(bool backward, const FusedArgs& a, long long grid, std::size_t smem) {
  using Acc = typename Ops::Acc;
  const std::size_t n = smem / sizeof(Acc) + 1;
  const bool poison_each = static_cast<double>(grid) * static_cast<double>(smem) <= 64.0 * (1 << 20);
  // Threads only pay off for real work: waking an OpenMP team costs from microseconds up to
  // milliseconds on a loaded machine (torch runs its own OpenMP runtime beside ours).
  const double work = static_cast<double>(a.M) * static_cast<double>(a.L) *
                      static_cast<double>(a.s_in > a.s_out ? a.s_in : a.s_out) * a.nf;
  const bool parallel = grid > 1 && work > double(1 << 20);
  ThreadScratch<Acc> scratch(n, parallel);  // made before the region: a bad_alloc inside would abort
#if defined(_OPENMP)
#pragma omp parallel if (parallel)
#endif
  {
    Acc* const sm = scratch.get();
    poison(sm, n);
    HostExec ex;
#if defined(_OPENMP)
#pragma omp for schedule(dynamic, 1)
#endif
    for (long long b = 0; b < grid; ++b) {
      if (poison_each) poison(sm, n);
      if (backward)
        fused_backward_program<Ops, RN>(a, ex, sm, b, grid);
      else
        fused_forward_program<Ops, RN>(a, ex, sm, b, grid);
    }
  }
}

/// Whether the emulated threads of a phase run in reverse order (SPARSEKERN_KRON_EMU_ORDER=reverse,
/// read per block program): a phase whose threads depend on each other (a read of what another
/// thread writes in the same phase, a race on the GPU) then computes something else, so running
/// the tests both ways exposes it without a GPU.
bool emu_reverse() {
  const char* v = std::getenv("SPARSEKERN_KRON_EMU_ORDER");
  return v != nullptr && std::string(v) == "reverse";
}

/// HostExec for the register-tile program: one register file per emulated thread, kept across
/// phases as the GPU keeps it across barriers.
template <class Regs>
struct HostExecRegs {
  int nt = kThreads;
  bool reverse = false;
  std::vector<Regs> regs;
  explicit HostExecRegs(int threads) : nt(threads), reverse(emu_reverse()), regs(static_cast<std::size_t>(threads)) {}
  int nthreads() const { return nt; }
  template <class F>
  void phase(F&& f) {
    if (reverse) {
      for (int t = nt - 1; t >= 0; --t) f(t, regs[t]);
    } else {
      for (int t = 0; t < nt; ++t) f(t, regs[t]);
    }
  }
  template <class F>
  void phase_nosync(F&& f) {
    phase(f);
  }
  void sync() {}  // each phase runs every thread to its end before the next starts
};

template <int TILE>
void run_fast(int threads, const FastArgs& a, long long grid, std::size_t smem) {
  const std::size_t n = smem / sizeof(float) + 1;
  const double work = static_cast<double>(a.M) * static_cast<double>(a.st[a.nf - 1].hs) * a.nf * 64.0;
  const bool parallel = grid > 1 && work > double(1 << 20);
  ThreadScratch<float> scratch(n, parallel);
  PerThread<HostExecRegs<FastRegs<TILE, TILE>>> execs(parallel, threads);
#if defined(_OPENMP)
#pragma omp parallel if (parallel)
#endif
  {
    float* const sm = scratch.get();
    auto& ex = execs.get();
#if defined(_OPENMP)
#pragma omp for schedule(dynamic, 1)
#endif
    for (long long b = 0; b < grid; ++b) {
      poison(sm, n);  // a read of anything the program did not write poisons its output
      fast_forward_program<TILE, TILE>(a, ex, sm, b, grid);
    }
  }
}

/// Runs `program(ex, sm, block)` for every block of a small-factor kernel (the caller picks the
/// instantiation the GPU runs, see kron_small_fwd_f32.cu / kron_small_bwd_f32.cu): blocks in
/// parallel when the work pays for the threads, shared memory poisoned before each.
template <class Regs, class Program>
void run_small_blocks(int threads, const SmallArgs& a, long long grid, std::size_t smem, double passes,
                      Program&& program) {
  const std::size_t n = smem / sizeof(float) + 1;
  const double work = static_cast<double>(a.M) * static_cast<double>(1LL << a.ln) * passes * 16.0;
  const bool parallel = grid > 1 && work > double(1 << 20);
  ThreadScratch<float> scratch(n, parallel);
  PerThread<HostExecRegs<Regs>> execs(parallel, threads);
#if defined(_OPENMP)
#pragma omp parallel if (parallel)
#endif
  {
    float* const sm = scratch.get();
    auto& ex = execs.get();
#if defined(_OPENMP)
#pragma omp for schedule(dynamic, 1)
#endif
    for (long long b = 0; b < grid; ++b) {
      poison(sm, n);  // a read of anything the program did not write poisons its output
      program(ex, sm, b);
    }
  }
}

/// f(IntC<NT>) with NT the block size where the shape is uniform (UP > 0; the CUDA kernels then
/// pass it to the programs as a constant), else f(IntC<0>): the emulation runs the same code.
template <int UP, class F>
void with_uniform_threads(int threads, F&& f) {
  if constexpr (UP > 0) {
    if (threads == 128) {
      f(IntC<128>{});
      return;
    }
    if (threads == 256) {
      f(IntC<256>{});
      return;
    }
  }
  f(IntC<0>{});
}

void run_small(int threads, const SmallArgs& a, long long grid, std::size_t smem) {
  // The kernel the GPU would run (with_small_shape: a uniform-shape one where it applies, with the
  // block size and the store form as constants, as kron_small_fwd_f32.cu instantiates it).
  with_small_shape(a, [&](auto pmax, auto up, auto nf) {
    constexpr int UP = decltype(up)::value;
    with_uniform_threads<UP>(threads, [&](auto ntc) {
      with_small_store_form<UP>(a, [&](auto vyc) {
        run_small_blocks<SmallRegs>(threads, a, grid, smem, a.nf, [&](auto& ex, float* sm, long long b) {
          small_forward_program<decltype(pmax)::value, UP, decltype(nf)::value, decltype(ntc)::value,
                                decltype(vyc)::value>(a, ex, sm, b, grid);
        });
      });
    });
  });
}

void run_small_bwd(int threads, const SmallBwdArgs& a, long long grid, std::size_t smem) {
  if (a.lean != 0) {
    with_pmax(a.a.pmax, [&](auto pmax) {
      run_small_blocks<SmallBwdRegs>(threads, a.a, grid, smem, 3.0 * a.a.nf, [&](auto& ex, float* sm, long long b) {
        small_backward_program<decltype(pmax)::value, true>(a, ex, sm, b, grid);
      });
    });
    return;
  }
  // The kernel the GPU would run (with_small_shape: a uniform-shape one where it applies).
  with_small_shape(a.a, [&](auto pmax, auto up, auto nf) {
    with_uniform_threads<decltype(up)::value>(threads, [&](auto ntc) {
      run_small_blocks<SmallBwdRegs>(threads, a.a, grid, smem, 3.0 * a.a.nf, [&](auto& ex, float* sm, long long b) {
        small_backward_program<decltype(pmax)::value, false, decltype(up)::value, decltype(nf)::value,
                               decltype(ntc)::value>(a, ex, sm, b, grid);
      });
    });
  });
}

template <int TILE>
void run_fast_bwd(const FastBwdArgs& a, long long grid, std::size_t smem) {
  const std::size_t n = smem / sizeof(float) + 1;
  const double work = static_cast<double>(a.M) * a.p0 * a.p1 * 5.0 * 64.0;
  const bool parallel = grid > 1 && work > double(1 << 20);
  ThreadScratch<float> scratch(n, parallel);
  PerThread<HostExecRegs<FastBwdRegs<TILE>>> execs(parallel, kThreads);
#if defined(_OPENMP)
#pragma omp parallel if (parallel)
#endif
  {
    float* const sm = scratch.get();
    auto& ex = execs.get();
#if defined(_OPENMP)
#pragma omp for schedule(dynamic, 1)
#endif
    for (long long b = 0; b < grid; ++b) {
      poison(sm, n);  // a read of anything the program did not write poisons its output
      // The CUDA launcher's specialisations (kron_fast_bwd_f32.cu), so the tests run each.
      with_fb_width<TILE>(a, [&](auto u) { fast_backward2_program<TILE, decltype(u)::value>(a, ex, sm, b, grid); });
    }
  }
}

template <class Ops>
void run_fused_rn(bool backward, int rn, const FusedArgs& a, long long grid, std::size_t smem) {
  if (rn == 4)
    run_fused<Ops, 4>(backward, a, grid, smem);
  else
    run_fused<Ops, 8>(backward, a, grid, smem);
}

/// C[b] = A[b] · B[b] through the register-tiled CPU GEMM (src/common/cpu_gemm.h), B packed, so its
/// inner loops run at unit stride whatever the operands' strides (the batched steps read B
/// transposed, p apart: the unpacked row loop of sessions 1-10 ran 256 × (128 ⊗ 128) 7x slower
/// than torch per factor on 2 cores).
template <typename T, typename CT>
void gemm_typed(const GemmDesc& g) {
  using Acc = typename acc_type<T>::type;
  CT* C = static_cast<CT*>(g.c);
  sparsekern::detail::gemm_batched<T, Acc>(
      g.batch, g.m, g.n, g.k, static_cast<const T*>(g.a), g.a_bs, g.a_rs, g.a_cs, static_cast<const T*>(g.b), g.b_bs,
      g.b_rs, g.b_cs, [&](long long b, long long i, long long j, Acc v) { C[b * g.c_bs + i * g.c_rs + j] = CT(v); });
}

template <typename T>
void reduce_typed(const ReduceDesc& r) {
  using Acc = typename acc_type<T>::type;
  const Acc* part = static_cast<const Acc*>(r.partial);
  const Acc* acc_in = static_cast<const Acc*>(r.acc_in);
  for (int i = 0; i < r.p; ++i) {
    for (int j = 0; j < r.q; ++j) {
      const long long e = static_cast<long long>(i) * r.q + j;
      Acc sum = acc_in != nullptr ? acc_in[e] : Acc(0);
      for (long long b = 0; b < r.count; ++b) sum += part[b * r.stride + e];
      if (r.acc_out != nullptr)
        static_cast<Acc*>(r.acc_out)[e] = sum;
      else
        static_cast<T*>(r.out)[i * r.out_rs + j * r.out_cs] = T(sum);
    }
  }
}

/// FactorGradArgs on the CPU: per chunk of rows, G's rows transposed into a buffer ((rows·L) × q)
/// and one GEMM of K = rows·L over X's rows (which are (rows·L) × p at unit row stride p when the
/// state is dense), summed across chunks. The batched GEMMs of the default path have K = L per row
/// and write a partial per row, which costs most where L is small. Session 24, this 2-core
/// machine, backward ms, batched → this, interleaved twice: 1024 × (32 ⊗ 32) (L = 32) 20.3 / 21.5
/// → 8.3 / 10.1, (64 ⊗ 64) 81 / 95 → 51 / 60, 16 × (32 ⊗ 32) even; but where L ≥ 128 slower (its
/// transpose and B packing run on one thread): (16)^3 (L = 256) 34 / 42 → 56 / 63, (8)^4 59-63 →
/// 92-100, 32 × (128 ⊗ 128) 8.6-9.0 → 11.2-12.2. So for L ≤ kFactorGradMaxL, and dense X rows;
/// false (the batched path) otherwise.
constexpr long long kFactorGradMaxL = 64;

template <typename T>
bool factor_grad_typed(const FactorGradArgs& f) {
  using Acc = typename acc_type<T>::type;
  const long long L = f.L, p = f.p, q = f.q;
  if (f.M <= 0 || L <= 0 || L > kFactorGradMaxL || f.ldx != L * p) return false;
  const T* const x = static_cast<const T*>(f.x);
  const T* const g = static_cast<const T*>(f.g);
  // About 4096 contraction steps per GEMM: the packed B (K × q) stays in the cache.
  const long long rows = std::max<long long>(1, std::min<long long>(f.M, 4096 / L));
  std::vector<T> gt(static_cast<std::size_t>(rows * L * q));
  std::vector<Acc> sum(static_cast<std::size_t>(p * q), Acc(0));
  for (long long m0 = 0; m0 < f.M; m0 += rows) {
    const long long nb = std::min(rows, f.M - m0);
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) if (nb * L * q > (1 << 16))
#endif
    for (long long mm = 0; mm < nb; ++mm) {
      const T* const gm = g + (m0 + mm) * f.ldg;
      T* const dst = gt.data() + mm * L * q;
      for (long long j = 0; j < q; ++j)
        for (long long l = 0; l < L; ++l) dst[l * q + j] = gm[j * L + l];
    }
    // sum (p × q) += Xᵀ (p × nb·L) · Gᵀ (nb·L × q); X's element (i, r) at x[m0·ldx + r·p + i]. The
    // GEMM's threads take disjoint rows i.
    sparsekern::detail::gemm_batched<T, Acc>(1, p, q, nb * L, x + m0 * f.ldx, 0, 1, p, gt.data(), 0, q, 1,
                                             [&](long long, long long i, long long j, Acc v) { sum[i * q + j] += v; });
  }
  T* const out = static_cast<T*>(f.out);
  for (long long i = 0; i < p; ++i)
    for (long long j = 0; j < q; ++j) out[i * f.out_rs + j * f.out_cs] = T(sum[i * q + j]);
  return true;
}

class CpuBackend final : public Backend {
 public:
  /// The CPU runs every mode as one GEMM step (gemm_steps: its fastest plan), unless
  /// SPARSEKERN_KRON_CPU=emulate (read per plan; the test suite sets it): then it plans for a
  /// virtual GPU with an H100's shared memory (half an SM per generic fused block, 227 KB opt-in for
  /// a register-tile block; so its tests cover the GPU's grouping and tiles) and 8 SMs (few
  /// persistent blocks: small partial-sum buffers, several tiles per block), and runs the fused
  /// groups' GPU block programs, emulated.
  Limits limits(Device) override {
    const char* mode = std::getenv("SPARSEKERN_KRON_CPU");
    Limits lim{113664, 233472, 8, 232448};
    lim.gemm_steps = mode == nullptr || std::string(mode) != "emulate";
    return lim;
  }

  void fused_forward(DType dtype, int rn, const FusedArgs& a, long long grid, std::size_t smem, Device,
                     Stream) override {
    SK_DTYPE_SWITCH(dtype, T, [&] { run_fused_rn<HostOps<T>>(false, rn, a, grid, smem); });
  }
  void fused_backward(DType dtype, int rn, const FusedArgs& a, long long grid, std::size_t smem, Device,
                      Stream) override {
    SK_DTYPE_SWITCH(dtype, T, [&] { run_fused_rn<HostOps<T>>(true, rn, a, grid, smem); });
  }
  void fused_backward_fast(int tile, const FastBwdArgs& a, long long grid, std::size_t smem, Device,
                           Stream) override {
    if (tile == 4)
      run_fast_bwd<4>(a, grid, smem);
    else
      run_fast_bwd<8>(a, grid, smem);
  }
  void fused_forward_fast(int tile, int threads, const FastArgs& a, long long grid, std::size_t smem, Device,
                          Stream) override {
    if (tile == 4)
      run_fast<4>(threads, a, grid, smem);
    else
      run_fast<8>(threads, a, grid, smem);
  }
  void fused_forward_small(int threads, const SmallArgs& a, long long grid, std::size_t smem, Device,
                           Stream) override {
    run_small(threads, a, grid, smem);
  }
  void fused_backward_small(int threads, const SmallBwdArgs& a, long long grid, std::size_t smem, Device,
                            Stream) override {
    run_small_bwd(threads, a, grid, smem);
  }
  void head_pass(const HeadArgs& h, Device, Stream) override {  // kron_head.h's program, chunk by chunk
    float sa[kHeadMaxP * kHeadMaxP];
    head_load_a(h, sa, 0, 1);
    const long long chunks = h.M * (h.L >> 2);
    for (long long c = 0; c < chunks; ++c) head_chunk<kHeadMaxP>(h, sa, c);
  }
  void gemm(DType dtype, const GemmDesc& g, dense::Fp32Math, Workspace, Device, Stream) override {
    SK_DTYPE_SWITCH(dtype, T, [&] {
      using Acc = typename acc_type<T>::type;
      if (g.c_acc)
        gemm_typed<T, Acc>(g);
      else
        gemm_typed<T, T>(g);
    });
  }
  void reduce(DType dtype, const ReduceDesc& r, Device, Stream) override {
    SK_DTYPE_SWITCH(dtype, T, [&] { reduce_typed<T>(r); });
  }
  bool factor_grad(DType dtype, const FactorGradArgs& f, Device, Stream) override {
    bool done = false;
    SK_DTYPE_SWITCH(dtype, T, [&] { done = factor_grad_typed<T>(f); });
    return done;
  }
};

}  // namespace

Backend& cpu_backend() {
  static CpuBackend b;
  return b;
}

}  // namespace sparsekern::kron::detail
