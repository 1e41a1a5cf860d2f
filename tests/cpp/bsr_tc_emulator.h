#pragma once
// A host emulator of one CUDA thread block, for running the block-sparse tensor-core kernel bodies
// (src/bsr/tc/kernel.cuh) on a machine without a GPU.
//
// Every CUDA thread of the block is a cooperative user-space thread (makecontext for the stacks,
// _setjmp/_longjmp to switch: no system call per switch). The operations the kernels route through
// arch.cuh are emulated from the PTX ISA, independently of CuTe:
//   - __syncthreads: a block barrier;
//   - cp.async (16 B, zero-fill) / commit_group / wait_group: copies are queued per thread and land
//     either when the thread waits for their group (kDeferred: the latest the hardware may complete
//     them) or as soon as they are issued (kImmediate: the earliest). A kernel correct under both
//     neither reads a stage before its copies completed nor overwrites a stage still being read;
//   - ldmatrix.x4 (.trans) and mma.sync m16n8k16 (fp16/bf16) / m16n8k8 (tf32): warp-collective,
//     each lane publishes its operands, the warp meets at a barrier, each lane computes its result.
// It also checks what the hardware would fault on or what would silently corrupt memory: 16-byte
// alignment of cp.async / ldmatrix / vector stores, shared addresses inside the block's buffer,
// global addresses inside registered buffers; and it counts ldmatrix bank conflicts.
#define SPARSEKERN_TC_EMULATION 1

#include <ucontext.h>

#include <csetjmp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "bsr/tc/kernel.cuh"

namespace sparsekern::bsr::tc::emu {

enum class CopyMode { kDeferred, kImmediate };

struct Problem {  // what an emulated launch may touch, for bounds checks
  struct Range {
    const char* lo;
    const char* hi;
  };
  std::vector<Range> global;
  void add(const void* p, std::size_t bytes) {
    global.push_back({static_cast<const char*>(p), static_cast<const char*>(p) + bytes});
  }
};

struct Stats {
  long long ldmatrix_phases = 0, ldmatrix_conflicted_phases = 0, cp_async = 0, mma = 0;
  long long lds32_loads = 0, lds32_conflicted = 0;  // warp-wide 32-bit shared loads, and those with conflicts
  std::vector<std::string> errors;
};

class Block {
 public:
  Block(int threads, std::size_t smem_bytes, CopyMode mode, const Problem& problem, Stats& stats)
      : n_(threads), mode_(mode), problem_(problem), stats_(stats),
        smem_(smem_bytes + 128), threads_(threads), warps_((threads + 31) / 32) {
    // Garbage in shared memory: a kernel that reads what it never wrote sees NaNs.
    for (std::size_t i = 0; i + 4 <= smem_.size(); i += 4) std::memcpy(&smem_[i], "\xff\xff\xff\x7f", 4);
    base_ = smem_.data() + (128 - reinterpret_cast<std::uintptr_t>(smem_.data()) % 128) % 128;
    smem_bytes_ = smem_bytes;
  }

  char* smem() { return base_; }

  /// Runs body(tid) for every thread of the block to completion.
  void run(const std::function<void(int)>& body) {
    body_ = &body;
    current() = this;
    for (int t = 0; t < n_; ++t) {
      Thread& th = threads_[t];
      th.stack.resize(kStackBytes);
      getcontext(&th.start);
      th.start.uc_stack.ss_sp = th.stack.data();
      th.start.uc_stack.ss_size = th.stack.size();
      th.start.uc_link = nullptr;
      makecontext(&th.start, reinterpret_cast<void (*)()>(&Block::entry), 0);
    }
    int alive = n_;
    while (alive > 0) {
      bool progressed = false;
      for (int t = 0; t < n_; ++t) {
        Thread& th = threads_[t];
        if (th.finished || th.waiting) continue;
        progressed = true;
        cur_ = t;
        if (!_setjmp(sched_)) {
          if (!th.started) {
            th.started = true;
            swapcontext(&sched_ctx_, &th.start);
          } else {
            _longjmp(th.jmp, 1);
          }
        }
        if (th.finished) --alive;
      }
      if (!progressed) {
        error("deadlock: every live thread waits at a barrier the others never reach");
        break;
      }
    }
    current() = nullptr;
  }

  // -- operations called by the kernel threads -----------------------------------------------
  void sync_threads() { barrier(block_barrier_, n_, 1); }

  void cp_async(void* dst, const void* src, bool pred) {
    ++stats_.cp_async;
    check_smem(dst, 16, "cp.async destination");
    if (pred) check_global(src, 16, "cp.async source");
    Copy c{dst, src, pred};
    if (mode_ == CopyMode::kImmediate) {
      perform(c);
    } else {
      threads_[cur_].open.push_back(c);
    }
  }
  void fence() {
    Thread& th = threads_[cur_];
    th.groups.push_back(std::move(th.open));
    th.open.clear();
  }
  void wait(int pending) {
    Thread& th = threads_[cur_];
    while (int(th.groups.size()) > pending) {
      for (const Copy& c : th.groups.front()) perform(c);
      th.groups.pop_front();
    }
  }

  void ldmatrix(const void* row, std::uint32_t (&dst)[4], bool trans) {
    check_smem(row, 16, "ldmatrix row");
    Lane& me = lanes_[cur_];
    me.addr = static_cast<const char*>(row);
    warp_barrier();
    const int warp0 = (cur_ / 32) * 32, lane = cur_ % 32;
    if (lane == 0) count_conflicts(warp0);
    for (int i = 0; i < 4; ++i) {
      if (!trans) {  // word (lane/4, lane%4) of matrix i
        const char* r = lanes_[warp0 + 8 * i + lane / 4].addr;
        std::memcpy(&dst[i], r + 4 * (lane % 4), 4);
      } else {  // elements (2(lane%4), lane/4) and (2(lane%4)+1, lane/4) of matrix i
        const char* r0 = lanes_[warp0 + 8 * i + 2 * (lane % 4)].addr;
        const char* r1 = lanes_[warp0 + 8 * i + 2 * (lane % 4) + 1].addr;
        std::uint16_t lo, hi;
        std::memcpy(&lo, r0 + 2 * (lane / 4), 2);
        std::memcpy(&hi, r1 + 2 * (lane / 4), 2);
        dst[i] = std::uint32_t(lo) | (std::uint32_t(hi) << 16);
      }
    }
    warp_barrier();
  }

  /// A warp-wide 32-bit shared load: one wavefront when no two lanes read different words of one
  /// bank (lanes reading the same word are a broadcast).
  std::uint32_t lds32(const std::uint32_t* p) {
    const char* q = reinterpret_cast<const char*>(p);
    if (reinterpret_cast<std::uintptr_t>(q) % 4 != 0) error("misaligned 32-bit shared load");
    if (q < base_ || q + 4 > base_ + smem_bytes_) error("32-bit shared load outside shared memory");
    lanes_[cur_].addr = q;
    warp_barrier();
    const int warp0 = (cur_ / 32) * 32, lane = cur_ % 32;
    if (lane == 0) {
      const int size = std::min(32, n_ - warp0);
      bool conflict = false;
      for (int i = 0; i < size; ++i)
        for (int j = 0; j < i; ++j) {
          const std::ptrdiff_t wi = (lanes_[warp0 + i].addr - base_) / 4, wj = (lanes_[warp0 + j].addr - base_) / 4;
          conflict |= wi != wj && wi % 32 == wj % 32;
        }
      ++stats_.lds32_loads;
      stats_.lds32_conflicted += conflict;
    }
    std::uint32_t v;
    std::memcpy(&v, q, 4);
    warp_barrier();
    return v;
  }

  // A(r, k) / B(k, n) of the warp's operands, from the PTX fragment layouts.
  void mma(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2],
           const float (&c)[4], int kind /*0 fp16, 1 bf16, 2 tf32*/) {
    ++stats_.mma;
    Lane& me = lanes_[cur_];
    std::memcpy(me.a, a, sizeof a);
    std::memcpy(me.b, b, sizeof b);
    warp_barrier();
    const int warp0 = (cur_ / 32) * 32, lane = cur_ % 32, g = lane / 4, t = lane % 4;
    const int kk = kind == 2 ? 8 : 16;
    for (int i = 0; i < 4; ++i) {
      const int row = g + 8 * (i / 2), col = 2 * t + i % 2;
      double acc = c[i];
      for (int k = 0; k < kk; ++k) acc += double(a_elem(warp0, row, k, kind)) * b_elem(warp0, k, col, kind);
      d[i] = float(acc);
    }
    warp_barrier();
  }

  void global_store(void* dst) {
    if (reinterpret_cast<std::uintptr_t>(dst) % 16 != 0) error("misaligned 16-byte global store");
    check_global(dst, 16, "16-byte global store");
  }

  static Block*& current() {
    static Block* b = nullptr;
    return b;
  }

 private:
  static constexpr std::size_t kStackBytes = 256 << 10;

  struct Copy {
    void* dst;
    const void* src;
    bool pred;
  };
  struct Thread {
    ucontext_t start;
    jmp_buf jmp;
    std::vector<char> stack;
    bool started = false, finished = false;
    int waiting = 0;  // id of the barrier it waits at (0: none)
    std::vector<Copy> open;
    std::deque<std::vector<Copy>> groups;
  };
  struct Lane {
    const char* addr = nullptr;
    std::uint32_t a[4] = {}, b[2] = {};
  };
  struct Barrier {
    int arrived = 0;
  };

  static void entry() {
    Block* self = current();
    const int t = self->cur_;
    (*self->body_)(t);
    self->threads_[t].finished = true;
    _longjmp(self->sched_, 1);
  }

  /// Arrive at barrier `bar` (of `count` threads, id `id`), yield until all arrived.
  void barrier(Barrier& bar, int count, int id) {
    Thread& me = threads_[cur_];
    me.waiting = id;
    if (++bar.arrived == count) {
      bar.arrived = 0;
      for (auto& th : threads_)
        if (th.waiting == id) th.waiting = 0;
    }
    if (!_setjmp(me.jmp)) _longjmp(sched_, 1);
  }

  void warp_barrier() {
    const int w = cur_ / 32;
    const int size = std::min(32, n_ - w * 32);
    barrier(warp_barriers_[w], size, 2 + w);
  }

  float a_elem(int warp0, int r, int k, int kind) const {
    if (kind == 2) {  // tf32 16×8: a0 (g,t) a1 (g+8,t) a2 (g,t+4) a3 (g+8,t+4)
      const std::uint32_t w = lanes_[warp0 + (r % 8) * 4 + k % 4].a[r / 8 + 2 * (k / 4)];
      return tf32(w);
    }
    // 16-bit 16×16: reg (r/8) + 2(k/8), half k%2, lane (r%8)*4 + (k%8)/2
    const std::uint32_t w = lanes_[warp0 + (r % 8) * 4 + (k % 8) / 2].a[r / 8 + 2 * (k / 8)];
    return half_val(std::uint16_t(w >> (16 * (k % 2))), kind == 1);
  }
  float b_elem(int warp0, int k, int n, int kind) const {
    if (kind == 2) {  // tf32 8×8: b0 (k=t, n=g), b1 (k=t+4, n=g)
      return tf32(lanes_[warp0 + n * 4 + k % 4].b[k / 4]);
    }
    const std::uint32_t w = lanes_[warp0 + n * 4 + (k % 8) / 2].b[k / 8];
    return half_val(std::uint16_t(w >> (16 * (k % 2))), kind == 1);
  }
  static float tf32(std::uint32_t bits) {  // the tensor core reads the top 19 bits
    bits &= 0xffffe000u;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  static float half_val(std::uint16_t bits, bool bf16) {
    return bf16 ? float(cute::bfloat16_t::bitcast(bits)) : float(cute::half_t::bitcast(bits));
  }

  void perform(const Copy& c) {
    if (c.pred) std::memcpy(c.dst, c.src, 16);
    else std::memset(c.dst, 0, 16);
  }

  void check_smem(const void* p, std::size_t bytes, const char* what) {
    const char* q = static_cast<const char*>(p);
    if (reinterpret_cast<std::uintptr_t>(q) % 16 != 0) error(std::string("misaligned ") + what);
    if (q < base_ || q + bytes > base_ + smem_bytes_) error(std::string(what) + " outside shared memory");
  }
  void check_global(const void* p, std::size_t bytes, const char* what) {
    const char* q = static_cast<const char*>(p);
    if (reinterpret_cast<std::uintptr_t>(q) % 16 != 0) error(std::string("misaligned ") + what);
    for (const auto& r : problem_.global)
      if (q >= r.lo && q + bytes <= r.hi) return;
    error(std::string(what) + " outside every global buffer");
  }

  /// An ldmatrix phase reads one 8×16-byte matrix: conflict-free iff its 8 rows fall in 8
  /// distinct 16-byte bank groups.
  void count_conflicts(int warp0) {
    for (int i = 0; i < 4; ++i) {
      unsigned seen = 0;
      bool conflict = false;
      for (int r = 0; r < 8; ++r) {
        const unsigned group = unsigned((lanes_[warp0 + 8 * i + r].addr - base_) / 16) % 8;
        conflict |= (seen >> group) & 1u;
        seen |= 1u << group;
      }
      ++stats_.ldmatrix_phases;
      stats_.ldmatrix_conflicted_phases += conflict;
    }
  }

  void error(const std::string& e) {
    if (stats_.errors.size() < 20) stats_.errors.push_back(e);
  }

  int n_;
  CopyMode mode_;
  const Problem& problem_;
  Stats& stats_;
  std::vector<char> smem_;
  char* base_ = nullptr;
  std::size_t smem_bytes_ = 0;
  std::vector<Thread> threads_;
  std::vector<Lane> lanes_ = std::vector<Lane>(1024);
  Barrier block_barrier_;
  std::vector<Barrier> warp_barriers_ = std::vector<Barrier>(32);
  int warps_;
  int cur_ = 0;
  jmp_buf sched_;
  ucontext_t sched_ctx_;
  const std::function<void(int)>* body_ = nullptr;
};

// The hooks arch.cuh declares.
inline Block& blk() { return *Block::current(); }
void sync_threads() { blk().sync_threads(); }
void cp_async_16(void* smem_dst, const void* gmem_src, bool pred) { blk().cp_async(smem_dst, gmem_src, pred); }
void cp_async_fence() { blk().fence(); }
void cp_async_wait(int pending) { blk().wait(pending); }
void ldmatrix_x4(const void* smem_row, std::uint32_t (&dst)[4], bool trans) { blk().ldmatrix(smem_row, dst, trans); }
void mma_16816(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2],
               const float (&c)[4], bool bf16) { blk().mma(d, a, b, c, bf16 ? 1 : 0); }
void mma_1688_tf32(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2],
                   const float (&c)[4]) { blk().mma(d, a, b, c, 2); }
void global_store_16(void* gmem_dst) { blk().global_store(gmem_dst); }
std::uint32_t lds_32(const std::uint32_t* smem_src) { return blk().lds32(smem_src); }

}  // namespace sparsekern::bsr::tc::emu
