// Handle manager: cuBLAS / cuSPARSE handles created lazily per (device, thread).
//
// Why per thread: a cuBLAS handle is not safe to use from two threads at once, and creating one
// costs far more than an op (it loads kernels and allocates), so each thread keeps its own in a
// thread_local cache. Why a pool: threads come and go (data loaders, serving workers); a thread that
// exits hands its handles back and the next thread reuses them instead of creating new ones.
// Why not destroyed in a static destructor: at process exit the CUDA runtime may be torn down before
// our statics, and destroying a handle then can crash; Python's atexit calls destroy_all() while the
// driver is still alive, and C++ users may call it themselves.

#include <sparsekern/handles.h>

#include <array>
#include <atomic>
#include <mutex>
#include <vector>

#include "cuda_check.h"
#include "handles_internal.h"

namespace sparsekern::detail {
namespace {

constexpr int kMaxDevices = 64;

template <typename H>
struct HandleKind;
template <>
struct HandleKind<cublasHandle_t> {
  static cublasHandle_t create() {
    cublasHandle_t h = nullptr;
    SK_CUBLAS_TRY(cublasCreate(&h));
    return h;
  }
  static void destroy(cublasHandle_t h) { (void)cublasDestroy(h); }
};
template <>
struct HandleKind<cusparseHandle_t> {
  static cusparseHandle_t create() {
    cusparseHandle_t h = nullptr;
    SK_CUSPARSE_TRY(cusparseCreate(&h));
    return h;
  }
  static void destroy(cusparseHandle_t h) { (void)cusparseDestroy(h); }
};

/// Process-wide pool. Leaked on purpose (see the file comment).
struct Pool {
  std::mutex mutex;
  std::atomic<std::uint64_t> generation{1};  // bumped by destroy_all(); stale caches drop handles
  std::array<std::vector<cublasHandle_t>, kMaxDevices> free_cublas;
  std::array<std::vector<cusparseHandle_t>, kMaxDevices> free_cusparse;
  std::vector<std::pair<int, cublasHandle_t>> all_cublas;
  std::vector<std::pair<int, cusparseHandle_t>> all_cusparse;

  template <typename H> std::array<std::vector<H>, kMaxDevices>& free_list();
  template <typename H> std::vector<std::pair<int, H>>& all();
};
template <> std::array<std::vector<cublasHandle_t>, kMaxDevices>& Pool::free_list() { return free_cublas; }
template <> std::array<std::vector<cusparseHandle_t>, kMaxDevices>& Pool::free_list() { return free_cusparse; }
template <> std::vector<std::pair<int, cublasHandle_t>>& Pool::all() { return all_cublas; }
template <> std::vector<std::pair<int, cusparseHandle_t>>& Pool::all() { return all_cusparse; }

Pool& pool() {
  static Pool* p = new Pool();
  return *p;
}

/// One thread's handles; returned to the pool when the thread exits.
struct ThreadCache {
  std::uint64_t generation = 0;
  std::array<cublasHandle_t, kMaxDevices> cublas{};
  std::array<cusparseHandle_t, kMaxDevices> cusparse{};

  template <typename H> std::array<H, kMaxDevices>& slots();

  ~ThreadCache() {
    Pool& p = pool();
    std::lock_guard<std::mutex> lock(p.mutex);
    if (generation != p.generation.load()) return;  // destroyed by destroy_all() already
    for (int d = 0; d < kMaxDevices; ++d) {
      if (cublas[d]) p.free_cublas[d].push_back(cublas[d]);
      if (cusparse[d]) p.free_cusparse[d].push_back(cusparse[d]);
    }
  }
};
template <> std::array<cublasHandle_t, kMaxDevices>& ThreadCache::slots() { return cublas; }
template <> std::array<cusparseHandle_t, kMaxDevices>& ThreadCache::slots() { return cusparse; }

thread_local ThreadCache tls_cache;

template <typename H>
H acquire(int device) {
  SK_EXPECTS(device >= 0 && device < kMaxDevices, "device index ", device, " out of range [0, ",
             kMaxDevices, ")");
  Pool& p = pool();
  ThreadCache& cache = tls_cache;
  const std::uint64_t gen = p.generation.load(std::memory_order_acquire);
  if (cache.generation != gen) {  // first use on this thread, or destroy_all() ran since
    cache.cublas.fill(nullptr);
    cache.cusparse.fill(nullptr);
    cache.generation = gen;
  }
  H& slot = cache.slots<H>()[device];
  if (slot) return slot;
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    auto& free = p.free_list<H>()[device];
    if (!free.empty()) {
      slot = free.back();
      free.pop_back();
      return slot;
    }
  }
  H h = HandleKind<H>::create();  // outside the lock: creation is slow
  std::lock_guard<std::mutex> lock(p.mutex);
  p.all<H>().emplace_back(device, h);
  slot = h;
  return slot;
}

}  // namespace

cublasHandle_t cublas_handle(int device, Stream stream, Workspace workspace) {
  cublasHandle_t h = acquire<cublasHandle_t>(device);
  SK_CUBLAS_TRY(cublasSetStream(h, static_cast<cudaStream_t>(stream)));
  // cublasSetStream resets the workspace to cuBLAS's own pool; point it at the caller's buffer
  // (or at none) so that cuBLAS never allocates behind the caller's back.
  SK_CUBLAS_TRY(cublasSetWorkspace(h, workspace.bytes ? workspace.data : nullptr, workspace.bytes));
  return h;
}

cusparseHandle_t cusparse_handle(int device, Stream stream) {
  cusparseHandle_t h = acquire<cusparseHandle_t>(device);
  SK_CUSPARSE_TRY(cusparseSetStream(h, static_cast<cudaStream_t>(stream)));
  return h;
}

}  // namespace sparsekern::detail

namespace sparsekern::handles {

void init_cublas(Device device) {
  SK_EXPECTS(device.type == DeviceType::cuda, "init_cublas: `device` must be a CUDA device; got cpu");
  detail::require_cuda_device(device.index);
  detail::DeviceGuard guard(device.index);
  (void)detail::acquire<cublasHandle_t>(device.index);
}

void destroy_all() {
  detail::Pool& p = detail::pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  int previous = -1;
  const bool have_device = cudaGetDevice(&previous) == cudaSuccess;
  for (auto& [device, h] : p.all_cublas) {
    if (cudaSetDevice(device) == cudaSuccess) detail::HandleKind<cublasHandle_t>::destroy(h);
  }
  for (auto& [device, h] : p.all_cusparse) {
    if (cudaSetDevice(device) == cudaSuccess) detail::HandleKind<cusparseHandle_t>::destroy(h);
  }
  if (have_device) (void)cudaSetDevice(previous);
  (void)cudaGetLastError();
  p.all_cublas.clear();
  p.all_cusparse.clear();
  for (auto& v : p.free_cublas) v.clear();
  for (auto& v : p.free_cusparse) v.clear();
  p.generation.fetch_add(1, std::memory_order_acq_rel);
}

int live_handle_count() {
  detail::Pool& p = detail::pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  return static_cast<int>(p.all_cublas.size() + p.all_cusparse.size());
}

}  // namespace sparsekern::handles
