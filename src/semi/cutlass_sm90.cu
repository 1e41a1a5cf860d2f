// 2:4 semi-structured Y = X · Wᵀ (+ bias) on Hopper's sparse tensor cores with CUTLASS's sm90
// sparse GEMM (TMA + sparse wgmma, warp-specialized cooperative kernel), fp16 and bf16.
//
// Why besides cuSPARSELt: on an H200 with cuSPARSELt 0.8.0 (the nvidia-cusparselt-cu13 wheel
// torch 2.11 pins) every fp16 configuration that ran was slower than dense cuBLAS (the default
// one 1.5x, torch's own _cslt_sparse_mm 1.1x) and the rest failed with INTERNAL_ERROR or an
// illegal instruction; this kernel is compiled with the library, so what runs is what was tested.
// Python times it against cuSPARSELt and the dense product and keeps the fastest (semi.py).
//
// The GEMM in CUTLASS's terms: A = W (out × in, row-major: K-major, 2:4 along K = in), B = Xᵀ
// (K × m, column-major: X row-major), D = Yᵀ column-major (out × m), which is Y row-major
// (m × out). The bias is a per-row (per-out) broadcast in the epilogue (LinCombPerRowBias; a null
// pointer broadcasts 0). W is compressed once per weight version into CUTLASS's own format
// (values: out × in/2, metadata: SparseConfig's layout), by CUTLASS's compressor kernel.
#include <atomic>
#include <cstdint>
#include <type_traits>

#include "../common/check.h"
#include "../common/cuda_check.h"
#include "semi_internal.h"

#include <cuda_runtime_api.h>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/transform/device/transform_universal_adapter.hpp"
#include "cutlass/transform/kernel/sparse_gemm_compressor.hpp"

namespace sparsekern::semi::detail {
namespace {

using namespace cute;
using sparsekern::detail::concat;

/// Tile configurations, each one candidate of Python's timed choice (CUTLASS sm90 sparse GEMMs take
/// 128-row tiles per consumer pair in the cooperative schedule):
/// 0: 128 x 128 x 128 tiles, 1 x 2 cluster (CUTLASS's example 62 for Hopper sparse GEMMs);
/// 1: 128 x 256 x 128, 1 x 2 cluster: twice the columns per A (= W) tile, half the A traffic;
/// 2: 256 x 128 x 128, 2 x 1 cluster: twice the rows per B (= X) tile.
template <int C> struct TileCfg;
template <> struct TileCfg<0> { using Tile = Shape<_128, _128, _128>; using Cluster = Shape<_1, _2, _1>; };
template <> struct TileCfg<1> { using Tile = Shape<_128, _256, _128>; using Cluster = Shape<_1, _2, _1>; };
template <> struct TileCfg<2> { using Tile = Shape<_256, _128, _128>; using Cluster = Shape<_2, _1, _1>; };
constexpr int kConfigs = 3;

template <class T, int C = 0>
struct SparseGemm {
  using LayoutA = cutlass::layout::RowMajor;
  using LayoutB = cutlass::layout::ColumnMajor;
  using LayoutD = cutlass::layout::ColumnMajor;
  static constexpr int kAlign = 8;  // 16 bytes of 16-bit elements (TMA)
  using TileShape = typename TileCfg<C>::Tile;
  using ClusterShape = typename TileCfg<C>::Cluster;
  using Fusion = cutlass::epilogue::fusion::LinCombPerRowBias<T, float, T, T, float>;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassSparseTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD, kAlign, T, LayoutD, kAlign,
      cutlass::epilogue::TmaWarpSpecializedCooperative, Fusion>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassSparseTensorOp, T, LayoutA, kAlign, T, LayoutB, kAlign, float,
      TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;
  using ProblemShape = Shape<int, int, int, int>;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  using SparseConfig = typename Mainloop::SparseConfig;
  using ElementE = typename Mainloop::ElementE;
  using StrideA = cutlass::gemm::TagToStrideA_t<LayoutA>;
  using StrideB = typename Kernel::StrideB;
  using StrideD = typename Kernel::StrideD;
  using CompressorUtility =
      cutlass::transform::kernel::StructuredSparseCompressorUtility<ProblemShape, T, LayoutA, SparseConfig>;
  using CompressorKernel = cutlass::transform::kernel::StructuredSparseCompressor<ProblemShape, T, LayoutA,
                                                                                   SparseConfig, cutlass::arch::Sm90>;
  using Compressor = cutlass::transform::device::TransformUniversalAdapter<CompressorKernel>;
};

/// CUTLASS's status as an exception naming the step.
void check_status(cutlass::Status s, const char* what) {
  if (s != cutlass::Status::kSuccess)
    throw Error(concat("semi (CUTLASS sm90 2:4): ", what, " failed: ", cutlassGetStatusString(s)));
}

/// Packed strides (what cutlass/util's make_cute_packed_stride computes): the one dynamic stride
/// of a 2-D operand is its leading dimension `ld`; the batch stride is unused (one batch).
template <class Stride>
Stride packed(std::int64_t ld) {
  Stride s{};
  if constexpr (cute::is_static_v<cute::remove_cvref_t<decltype(cute::get<0>(s))>>)
    cute::get<1>(s) = ld;
  else
    cute::get<0>(s) = ld;
  return s;
}

template <class T>
typename SparseGemm<T>::ProblemShape problem(std::int64_t out, std::int64_t m, std::int64_t k) {
  return {static_cast<int>(out), static_cast<int>(m), static_cast<int>(k), 1};
}

template <class T>
CutlassSizes sizes_t(const WeightShape& w) {
  using G = SparseGemm<T>;
  const auto shape = problem<T>(w.rows, 1, w.cols);
  const auto stride_a = packed<typename G::StrideA>(w.cols);
  typename G::CompressorUtility util(shape, stride_a);
  CutlassSizes s;
  s.values_bytes = std::size_t(w.rows) * std::size_t(util.get_tensorA_k_physical()) * sizeof(T);
  s.metadata_bytes = std::size_t(util.get_metadata_m_physical()) * std::size_t(util.get_metadata_k_physical()) *
                     sizeof(typename G::ElementE);
  typename G::Compressor::Arguments args{shape, {nullptr, stride_a, nullptr, nullptr}, {}};
  s.buffer_bytes = G::Compressor::get_workspace_size(args);
  return s;
}

template <class T>
void compress_t(const WeightShape& w, const void* dense, void* values, void* metadata, Workspace buffer,
                cudaStream_t stream) {
  using G = SparseGemm<T>;
  const auto shape = problem<T>(w.rows, 1, w.cols);
  const auto stride_a = packed<typename G::StrideA>(w.cols);
  cutlass::KernelHardwareInfo hw;
  hw.device_id = w.device.index;
  hw.sm_count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(hw.device_id);
  typename G::Compressor::Arguments args{
      shape,
      {static_cast<const T*>(dense), stride_a, static_cast<T*>(values), static_cast<typename G::ElementE*>(metadata)},
      {hw}};
  typename G::Compressor op;
  check_status(op.can_implement(args), "compressor can_implement");
  SK_EXPECTS(buffer.bytes >= G::Compressor::get_workspace_size(args), "semi: compress buffer too small");
  check_status(op.initialize(args, buffer.data, stream), "compressor initialize");
  check_status(op.run(stream), "compressor run");
}

template <class T, int C>
typename SparseGemm<T, C>::Gemm::Arguments gemm_args(const LinearParams& p, const void* metadata) {
  using G = SparseGemm<T, C>;
  static_assert(std::is_same_v<typename G::SparseConfig, typename SparseGemm<T>::SparseConfig>,
                "every configuration reads the one compressed format (configuration 0's)");
  const auto shape = problem<T>(p.n, p.m, p.k);
  const auto stride_b = packed<typename G::StrideB>(p.k);
  const auto stride_d = packed<typename G::StrideD>(p.n);
  typename G::Gemm::Arguments args{
      cutlass::gemm::GemmUniversalMode::kGemm,
      shape,
      {static_cast<const T*>(p.weight), G::SparseConfig::fill_layoutA(shape), static_cast<const T*>(p.x), stride_b,
       static_cast<const typename G::ElementE*>(metadata), G::SparseConfig::fill_layoutE(shape)},
      {{}, nullptr, stride_d, static_cast<T*>(p.y), stride_d}};
  args.epilogue.thread.alpha = 1.0f;
  args.epilogue.thread.beta = 0.0f;
  args.epilogue.thread.bias_ptr = static_cast<const T*>(p.bias);
  cutlass::KernelHardwareInfo hw;
  hw.device_id = p.device.index;
  hw.sm_count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(hw.device_id);
  args.hw_info = hw;
  return args;
}

template <class T, int C>
std::size_t workspace_t(const LinearParams& p) {
  using G = SparseGemm<T, C>;
  auto args = gemm_args<T, C>(p, nullptr);
  check_status(typename G::Gemm().can_implement(args), "can_implement");
  return G::Gemm::get_workspace_size(args);
}

template <class T, int C>
void run_t(const LinearParams& p, const void* metadata, Workspace ws, cudaStream_t stream) {
  using G = SparseGemm<T, C>;
  auto args = gemm_args<T, C>(p, metadata);
  typename G::Gemm gemm;
  check_status(gemm.can_implement(args), "can_implement");
  const std::size_t need = G::Gemm::get_workspace_size(args);
  SK_EXPECTS(ws.bytes >= need, "semi cutlass_linear: `workspace` must hold ", need, " bytes; got ", ws.bytes);
  check_status(gemm.initialize(args, ws.data, stream), "initialize");
  check_status(gemm.run(stream), "run");
}

template <class Fn>
decltype(auto) by_dtype(DType t, Fn&& fn) {
  if (t == DType::f16) return fn(cutlass::half_t{});
  return fn(cutlass::bfloat16_t{});
}

/// fn(integral_constant<config>) for config 0 … kConfigs−1.
template <class Fn>
decltype(auto) by_config(int config, Fn&& fn) {
  SK_EXPECTS(config >= 0 && config < kConfigs, "semi (CUTLASS): `config` must be 0 .. ", kConfigs - 1, "; got ",
             config);
  if (config == 1) return fn(std::integral_constant<int, 1>{});
  if (config == 2) return fn(std::integral_constant<int, 2>{});
  return fn(std::integral_constant<int, 0>{});
}

}  // namespace

namespace {
bool query_device_ok(int device) {
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    (void)cudaGetLastError();  // a bad index is not sticky: clear it
    return false;
  }
  if (major != 9 || minor != 0) return false;  // sm_90a code runs on sm_90 only
  sparsekern::detail::DeviceGuard guard(device);
  cudaFuncAttributes attr{};
  if (cudaFuncGetAttributes(&attr, cutlass::device_kernel<SparseGemm<cutlass::half_t>::Kernel>) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attr.binaryVersion >= 90;
}
}  // namespace

bool cutlass_device_ok(int device) {
  // Asked on every cutlass_compress/cutlass_linear call: queried once per device (0 unknown,
  // 1 no, 2 yes), like the other families' per-device caches.
  static std::atomic<std::uint8_t> known[64] = {};
  if (device < 0 || device >= 64) return query_device_ok(device);
  std::uint8_t v = known[device].load(std::memory_order_relaxed);
  if (v == 0) {
    v = query_device_ok(device) ? 2 : 1;
    known[device].store(v, std::memory_order_relaxed);
  }
  return v == 2;
}

CutlassSizes cutlass_sizes(const WeightShape& w) {
  return by_dtype(w.dtype, [&](auto tag) { return sizes_t<decltype(tag)>(w); });
}

void cutlass_compress(const WeightShape& w, const void* dense, void* values, void* metadata, Workspace buffer,
                      Stream stream) {
  sparsekern::detail::DeviceGuard guard(w.device.index);
  by_dtype(w.dtype, [&](auto tag) {
    compress_t<decltype(tag)>(w, dense, values, metadata, buffer, static_cast<cudaStream_t>(stream));
  });
  SK_CUDA_CHECK_LAUNCH();
}

int cutlass_configs() { return kConfigs; }

std::size_t cutlass_workspace_size(const LinearParams& p, int config) {
  return by_dtype(p.dtype, [&](auto tag) {
    return by_config(config, [&](auto c) { return workspace_t<decltype(tag), decltype(c)::value>(p); });
  });
}

void cutlass_run(const LinearParams& p, const void* metadata, Workspace workspace, Stream stream, int config) {
  sparsekern::detail::DeviceGuard guard(p.device.index);
  by_dtype(p.dtype, [&](auto tag) {
    by_config(config, [&](auto c) {
      run_t<decltype(tag), decltype(c)::value>(p, metadata, workspace, static_cast<cudaStream_t>(stream));
    });
  });
  SK_CUDA_CHECK_LAUNCH();
}

}  // namespace sparsekern::semi::detail
