#pragma once
/// @file types.h
/// @brief Plain types shared by every sparsekern entry point: element types, devices, streams and
///        non-owning strided views. No CUDA, Python or torch types appear in the public API.

#include <cstddef>
#include <cstdint>

namespace sparsekern {

/// Element type of a tensor operand.
enum class DType : int { f16 = 0, bf16 = 1, f32 = 2, f64 = 3 };

/// Size in bytes of one element of `t`.
constexpr std::size_t dtype_size(DType t) {
  return t == DType::f16 || t == DType::bf16 ? 2 : t == DType::f32 ? 4 : 8;
}

/// Human-readable name ("float16", "bfloat16", "float32", "float64"), matching torch's names.
const char* dtype_name(DType t);

enum class DeviceType : int { cpu = 0, cuda = 1 };

/// Where an operand lives. `index` is the CUDA ordinal; ignored for the CPU.
struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;
  bool operator==(const Device& o) const {
    return type == o.type && (type == DeviceType::cpu || index == o.index);
  }
  bool operator!=(const Device& o) const { return !(*this == o); }
};

/// The stream a call runs on: a `cudaStream_t` passed as an opaque pointer (nullptr = the legacy
/// default stream). Ignored for CPU operands. Calls never synchronise the host with it.
using Stream = void*;

/// A non-owning view of a (possibly batched) matrix operand: element (b, r, c) lives at
/// `data + b*batch_stride + r*row_stride + c*col_stride` (strides in elements, not bytes).
/// A batch stride of 0 broadcasts one matrix over the batch.
struct MatrixView {
  const void* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t row_stride = 0;
  std::int64_t col_stride = 1;
  std::int64_t batch_stride = 0;
};

/// Mutable counterpart of MatrixView, for outputs.
struct MutableMatrixView {
  void* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t row_stride = 0;
  std::int64_t col_stride = 1;
  std::int64_t batch_stride = 0;
};

/// Caller-provided scratch memory on the operands' device (or host memory for CPU calls).
/// The library never allocates device memory itself; a workspace of 0 bytes is always valid
/// (the op then picks algorithms that need none).
struct Workspace {
  void* data = nullptr;
  std::size_t bytes = 0;
};

/// Whether the library was compiled with its CUDA backend.
bool built_with_cuda();

/// Number of CUDA devices visible at run time; 0 when built without CUDA or when no driver or
/// device is present (never throws).
int cuda_device_count();

/// Library version as "MAJOR.MINOR.PATCH".
const char* version();

/// Threads the CPU implementations use for the calls the calling thread makes from now on (the team
/// size of their OpenMP parallel regions: OpenMP keeps it per thread, like omp_set_num_threads,
/// which this calls on the library's OpenMP runtime). A new thread starts at the runtime's default
/// (OMP_NUM_THREADS, else one per core). Throws InvalidArgument for n < 1; no effect in a build
/// without OpenMP. The Python package sets it to torch.get_num_threads() in every thread that
/// calls an op on CPU tensors.
void set_cpu_threads(int n);

/// The team size the calling thread's next CPU call will use (1 in a build without OpenMP).
int cpu_threads();

}  // namespace sparsekern
