// CUDA backend of the Kronecker products: device limits for the planner, fused-kernel dispatch by
// dtype (kernels in kron_fused_*.cu), cuBLAS strided-batched GEMMs for large factors, and the
// deterministic reduction of ∂ℓ/∂F partial sums.
//
// cuBLAS is column-major and our GEMM views are row-major, so C = A·B is computed as the
// column-major product Cᵀ (n×m) = Bᵀ (n×k) · Aᵀ (k×m), where a row-major matrix is the column-major
// view of its transpose (as in dense/gemm_cuda.cu).

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdlib>
#include <type_traits>
#include <mutex>

#include "../common/cuda_check.h"
#include "../common/handles_internal.h"
#include "kron_fused.cuh"
#include "kron_internal.h"
#include "kron_launch.cuh"

namespace sparsekern::kron::detail {
namespace {

using sparsekern::detail::concat;

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::f32: return CUDA_R_32F;
    case DType::f64: return CUDA_R_64F;
  }
  throw TypeMismatch("unsupported dtype");
}

struct BlasOperand {
  cublasOperation_t op;
  long long ld;
};

/// The row-major view M (rows × cols, strides rs, cs) as cuBLAS sees Mᵀ: op N on the column-major
/// Mᵀ when columns are unit-stride, op T on the column-major M when rows are.
BlasOperand blas_operand(const char* name, long long rows, long long cols, long long rs, long long cs) {
  if (cols <= 1) cs = 1;  // strides of size-1 dims carry no information
  if (rows <= 1) rs = std::max<long long>(cols, 1);
  if (cs == 1 && rs >= std::max<long long>(cols, 1)) return {CUBLAS_OP_N, rs};
  if (rs == 1 && cs >= std::max<long long>(rows, 1)) return {CUBLAS_OP_T, cs};
  throw InvalidArgument(concat("kron: internal GEMM operand `", name, "` has strides (", rs, ", ", cs,
                               ") for shape ", rows, "x", cols, "; cuBLAS needs a unit stride"));
}

template <typename T, typename Acc>
__device__ __forceinline__ T convert(Acc v) {
  if constexpr (std::is_same<T, __half>::value) return __float2half_rn(v);
  else if constexpr (std::is_same<T, __nv_bfloat16>::value) return __float2bfloat16_rn(v);
  else return static_cast<T>(v);
}

/// Warps per reduction block. The partials are a few hundred (one per persistent block of the fused
/// backward: 264 at 1024 × (8⊗8⊗8⊗8) on an H100), summed a warp's chain of L2 loads at a time: 32
/// warps, about 8 loads each there, instead of 8 warps of ~33. Session 35 (H200, whole backward,
/// device µs, 8 → 32 warps): 1024 × (8)^4 53.5 → 52.9, (16,8,8) 20.9 → 20.4, (4)^5 24.4 → 24.0,
/// (16)^3 61.8 → 61.1, 128 × (32,32,32) 153.9 → 151.7, 256 × (16)^4 391.7 → 389.6; 1024 × (64,64)
/// 123.3 → 123.9 (its 4096-element ∂ℓ/∂F: 128 blocks of 1024 threads).
constexpr int kReduceWarps = 32;

/// Block of kReduceWarps warps over 32 consecutive elements of the p×q block: lane = element, warp
/// = every kReduceWarps-th partial; the warp sums are added in shared memory in a fixed order
/// (deterministic).
template <typename T, typename Acc>
__device__ __forceinline__ void reduce_block(const ReduceDesc& r, unsigned block) {
  __shared__ Acc sums[kReduceWarps][32];
  // Launched as a programmatic dependent of the kernel that wrote the partials (kron_pdl): wait
  // until that grid has finished and its writes are visible (a no-op in a plain launch).
  pdl_wait();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int n = r.p * r.q;
  const int e = static_cast<int>(block) * 32 + lane;
  Acc sum = Acc(0);
  if (e < n) {
    const Acc* part = static_cast<const Acc*>(r.partial) + e;
    for (long long b = warp; b < r.count; b += kReduceWarps) sum += part[b * r.stride];
  }
  sums[warp][lane] = sum;
  __syncthreads();
  if (warp != 0 || e >= n) return;
  Acc total = r.acc_in != nullptr ? static_cast<const Acc*>(r.acc_in)[e] : Acc(0);
#pragma unroll
  for (int w = 0; w < kReduceWarps; ++w) total += sums[w][lane];
  if (r.acc_out != nullptr) {
    static_cast<Acc*>(r.acc_out)[e] = total;
  } else {
    const int i = e / r.q, j = e - (e / r.q) * r.q;
    static_cast<T*>(r.out)[i * r.out_rs + j * r.out_cs] = convert<T, Acc>(total);
  }
}

template <typename T, typename Acc>
__global__ void __launch_bounds__(32 * kReduceWarps) kron_reduce_kernel(const __grid_constant__ ReduceDesc r) {
  reduce_block<T, Acc>(r, blockIdx.x);
}

/// One reduction per blockIdx.y; blocks past a reduction's p·q elements leave at once (the whole
/// block, before the barrier).
template <typename T, typename Acc>
__global__ void __launch_bounds__(32 * kReduceWarps) kron_reduce_batch_kernel(const __grid_constant__ ReduceBatch rb) {
  const ReduceDesc& r = rb.d[blockIdx.y];
  if (static_cast<long long>(blockIdx.x) * 32 >= static_cast<long long>(r.p) * r.q) return;
  reduce_block<T, Acc>(r, blockIdx.x);
}

/// Whether the fp32 fused forwards (register-tile and small-factor) and the backward's ∂ℓ/∂F
/// reduction launch as programmatic dependent launches (PDL, kron_launch.cuh) of
/// the kernel before them on the stream: where the device allows it (Limits::dependent_launch) and
/// SPARSEKERN_KRON_PDL is not "0" (read per launch, for comparisons). A kernel's blocks then start,
/// and wait at griddepcontrol.wait, while the previous kernel's last blocks finish, instead of
/// launching after it; inside a CUDA graph capture the edge becomes a programmatic one.
bool kron_pdl(const Limits& lim) {
  const char* v = std::getenv("SPARSEKERN_KRON_PDL");
  return lim.dependent_launch && !(v != nullptr && v[0] == '0' && v[1] == '\0');
}

/// The reduction kernel<<<grid, kReduceWarps warps, 0, s>>>(arg), a programmatic dependent where `pdl`.
template <class Arg>
void reduce_launch(void (*kernel)(Arg), dim3 grid, bool pdl, cudaStream_t s, const Arg& arg) {
  kron_launch(kernel, grid, dim3(32 * kReduceWarps), 0, s, pdl, arg);
}

class CudaBackend final : public Backend {
 public:
  Limits limits(Device device) override {
    sparsekern::detail::require_cuda_device(device.index);
    std::lock_guard<std::mutex> lock(mutex_);
    if (device.index < kMaxDevices && known_[device.index]) return cache_[device.index];
    int optin = 0, per_sm = 0, sms = 0, major = 0;
    SK_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device.index));
    SK_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device.index));
    SK_CUDA_TRY(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device.index));
    SK_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device.index));
    Limits lim;
    // Half an SM's shared memory (less the 1 KB the runtime reserves per block): two blocks stay
    // resident, so one block's global loads overlap the other's arithmetic.
    lim.smem_budget = static_cast<std::size_t>(std::min(optin, per_sm / 2 - 1024));
    lim.smem_per_sm = static_cast<std::size_t>(per_sm);
    lim.num_sms = std::max(sms, 1);
    // A register-tile forward block runs alone on its SM and may take all it can opt in to.
    lim.smem_block_max = static_cast<std::size_t>(std::min(optin, per_sm - 1024));
    lim.dependent_launch = major >= 9;
    if (device.index < kMaxDevices) {
      cache_[device.index] = lim;
      known_[device.index] = true;
    }
    return lim;
  }

  void fused_forward(DType dtype, int rn, const FusedArgs& a, long long grid, std::size_t smem, Device device,
                     Stream stream) override {
    sparsekern::detail::DeviceGuard guard(device.index);
    auto s = static_cast<cudaStream_t>(stream);
    switch (dtype) {
      case DType::f16: fused_forward_f16(rn, a, grid, smem, device.index, s); return;
      case DType::bf16: fused_forward_bf16(rn, a, grid, smem, device.index, s); return;
      case DType::f32: fused_forward_f32(rn, a, grid, smem, device.index, s); return;
      case DType::f64: fused_forward_f64(rn, a, grid, smem, device.index, s); return;
    }
    throw TypeMismatch("unsupported dtype");
  }

  void fused_backward(DType dtype, int rn, const FusedArgs& a, long long grid, std::size_t smem,
                      Device device, Stream stream) override {
    sparsekern::detail::DeviceGuard guard(device.index);
    auto s = static_cast<cudaStream_t>(stream);
    switch (dtype) {
      case DType::f16: fused_backward_f16(rn, a, grid, smem, device.index, s); return;
      case DType::bf16: fused_backward_bf16(rn, a, grid, smem, device.index, s); return;
      case DType::f32: fused_backward_f32(rn, a, grid, smem, device.index, s); return;
      case DType::f64: fused_backward_f64(rn, a, grid, smem, device.index, s); return;
    }
    throw TypeMismatch("unsupported dtype");
  }

  void fused_forward_fast(int tile, int threads, const FastArgs& a, long long grid, std::size_t smem,
                          Device device, Stream stream) override {
    sparsekern::detail::DeviceGuard guard(device.index);
    fast_forward_f32(tile, threads, a, grid, smem, device.index, static_cast<cudaStream_t>(stream),
                     kron_pdl(limits(device)));
  }

  void fused_forward_small(int threads, const SmallArgs& a, long long grid, std::size_t smem, Device device,
                           Stream stream) override {
    sparsekern::detail::DeviceGuard guard(device.index);
    small_forward_f32(threads, a, grid, smem, device.index, static_cast<cudaStream_t>(stream),
                      kron_pdl(limits(device)));
  }

  void fused_backward_small(int threads, const SmallBwdArgs& a, long long grid, std::size_t smem, Device device,
                            Stream stream) override {
    sparsekern::detail::DeviceGuard guard(device.index);
    small_backward_f32(threads, a, grid, smem, device.index, static_cast<cudaStream_t>(stream));
  }

  void head_pass(const HeadArgs& h, Device device, Stream stream) override {
    sparsekern::detail::DeviceGuard guard(device.index);
    head_pass_f32(h, device.index, static_cast<cudaStream_t>(stream));
  }

  bool head_grad(const HeadGradArgs& h, long long grid, Device device, Stream stream) override {
    sparsekern::detail::DeviceGuard guard(device.index);
    head_grad_f32(h, grid, device.index, static_cast<cudaStream_t>(stream));
    return true;
  }

  void fused_backward_fast(int tile, const FastBwdArgs& a, long long grid, std::size_t smem, Device device,
                           Stream stream) override {
    sparsekern::detail::DeviceGuard guard(device.index);
    fast_backward2_f32(tile, a, grid, smem, device.index, static_cast<cudaStream_t>(stream));
  }

  void gemm(DType dtype, const GemmDesc& g, dense::Fp32Math math, Workspace blas, Device device,
            Stream stream) override {
    if (g.batch == 0 || g.m == 0 || g.n == 0) return;
    SK_EXPECTS(g.m <= INT_MAX && g.n <= INT_MAX && g.k <= INT_MAX && g.k >= 1,
               "kron: GEMM sizes must fit in 32 bits for cuBLAS; got m=", g.m, " n=", g.n, " k=", g.k);
    sparsekern::detail::DeviceGuard guard(device.index);
    const BlasOperand bt = blas_operand("b", g.k, g.n, g.b_rs, g.b_cs);
    const BlasOperand at = blas_operand("a", g.m, g.k, g.a_rs, g.a_cs);
    const long long ldc = g.m <= 1 ? std::max<long long>(g.n, 1) : g.c_rs;
    SK_EXPECTS(bt.ld <= INT_MAX && at.ld <= INT_MAX && ldc <= INT_MAX,
               "kron: GEMM leading dimensions must fit in 32 bits for cuBLAS");
    cublasHandle_t handle = sparsekern::detail::cublas_handle(device.index, stream, blas);

    cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
    if (dtype == DType::f64)
      compute = CUBLAS_COMPUTE_64F;
    else if (dtype == DType::f32 && math == dense::Fp32Math::tf32)
      compute = CUBLAS_COMPUTE_32F_FAST_TF32;
    SK_CUBLAS_TRY(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH));
    SK_CUBLAS_TRY(cublasSetPointerMode(handle, CUBLAS_POINTER_MODE_HOST));
    const double alpha64 = 1.0, beta64 = 0.0;
    const float alpha32 = 1.0f, beta32 = 0.0f;
    const void* alpha = dtype == DType::f64 ? static_cast<const void*>(&alpha64) : &alpha32;
    const void* beta = dtype == DType::f64 ? static_cast<const void*>(&beta64) : &beta32;

    const cudaDataType_t ab_type = cuda_type(dtype);
    const cudaDataType_t c_type = !g.c_acc ? ab_type : (dtype == DType::f64 ? CUDA_R_64F : CUDA_R_32F);
    const std::size_t es = dtype_size(dtype), cs = g.c_acc ? acc_size(dtype) : es;
    // Strided-batched calls of at most 65535 matrices each: some cuBLAS kernels put the batch on
    // gridDim.y/z, whose limit that is.
    constexpr long long kMaxBatch = 65535;
    for (long long b0 = 0; b0 < g.batch; b0 += kMaxBatch) {
      const int nb = static_cast<int>(std::min(kMaxBatch, g.batch - b0));
      const char* a = static_cast<const char*>(g.a) + static_cast<std::size_t>(b0 * g.a_bs) * es;
      const char* b = static_cast<const char*>(g.b) + static_cast<std::size_t>(b0 * g.b_bs) * es;
      char* c = static_cast<char*>(g.c) + static_cast<std::size_t>(b0 * g.c_bs) * cs;
      if (nb == 1) {
        SK_CUBLAS_TRY(cublasGemmEx(handle, bt.op, at.op, static_cast<int>(g.n), static_cast<int>(g.m),
                                   static_cast<int>(g.k), alpha, b, ab_type, static_cast<int>(bt.ld), a,
                                   ab_type, static_cast<int>(at.ld), beta, c, c_type,
                                   static_cast<int>(ldc), compute, CUBLAS_GEMM_DEFAULT));
      } else {
        SK_CUBLAS_TRY(cublasGemmStridedBatchedEx(
            handle, bt.op, at.op, static_cast<int>(g.n), static_cast<int>(g.m), static_cast<int>(g.k),
            alpha, b, ab_type, static_cast<int>(bt.ld), g.b_bs, a, ab_type, static_cast<int>(at.ld),
            g.a_bs, beta, c, c_type, static_cast<int>(ldc), g.c_bs, nb, compute, CUBLAS_GEMM_DEFAULT));
      }
    }
  }

  void reduce(DType dtype, const ReduceDesc& r, Device device, Stream stream) override {
    const int n = r.p * r.q;
    if (n == 0) return;
    sparsekern::detail::DeviceGuard guard(device.index);
    auto s = static_cast<cudaStream_t>(stream);
    const dim3 blocks(static_cast<unsigned>((n + 31) / 32));
    const bool pdl = kron_pdl(limits(device));
    switch (dtype) {
      case DType::f16: reduce_launch(kron_reduce_kernel<__half, float>, blocks, pdl, s, r); break;
      case DType::bf16: reduce_launch(kron_reduce_kernel<__nv_bfloat16, float>, blocks, pdl, s, r); break;
      case DType::f32: reduce_launch(kron_reduce_kernel<float, float>, blocks, pdl, s, r); break;
      case DType::f64: reduce_launch(kron_reduce_kernel<double, double>, blocks, pdl, s, r); break;
    }
  }

  void reduce_batch(DType dtype, const ReduceBatch& rb, Device device, Stream stream) override {
    if (rb.n <= 0) return;
    SK_EXPECTS(rb.n <= kMaxFused, "kron: internal reduce batch of ", rb.n, " (at most ", kMaxFused, ")");
    long long blocks_x = 0;
    for (int i = 0; i < rb.n; ++i)
      blocks_x = std::max<long long>(blocks_x, (static_cast<long long>(rb.d[i].p) * rb.d[i].q + 31) / 32);
    if (blocks_x == 0) return;
    sparsekern::detail::DeviceGuard guard(device.index);
    auto s = static_cast<cudaStream_t>(stream);
    const dim3 grid(static_cast<unsigned>(blocks_x), static_cast<unsigned>(rb.n));
    const bool pdl = kron_pdl(limits(device));
    switch (dtype) {
      case DType::f16: reduce_launch(kron_reduce_batch_kernel<__half, float>, grid, pdl, s, rb); break;
      case DType::bf16: reduce_launch(kron_reduce_batch_kernel<__nv_bfloat16, float>, grid, pdl, s, rb); break;
      case DType::f32: reduce_launch(kron_reduce_batch_kernel<float, float>, grid, pdl, s, rb); break;
      case DType::f64: reduce_launch(kron_reduce_batch_kernel<double, double>, grid, pdl, s, rb); break;
    }
  }

 private:
  static constexpr int kMaxDevices = 64;
  std::mutex mutex_;
  std::array<Limits, kMaxDevices> cache_{};
  std::array<bool, kMaxDevices> known_{};
};

}  // namespace

Backend& cuda_backend() {
  static CudaBackend b;
  return b;
}

}  // namespace sparsekern::kron::detail
