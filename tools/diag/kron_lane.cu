// Session 26 diagnostic (not part of the library): a "lane owns an output column" forward for two
// square factors of 32, y = x · (F1 ⊗ F2), fp32, to see whether it beats the register-tile kernel at
// 1024 × (32 ⊗ 32) (9.1 µs device time, 31% of the roofline; target 60%).
//
// Per row, X (32 × 32, X[a][b] = x[a·32 + b]): T = X · F2, Y = F1ᵀ · T. Lane j keeps F2[:, j] in
// registers for the kernel's life, computes T[:, j] from broadcast reads of X (one float4 read by
// all lanes at one address), then Y[:, j] from broadcast reads of F1ᵀ, T[:, j] staying in
// registers; it stores Y[i][j] for every i (a warp writes 128 contiguous bytes per i). Each warp
// streams its own rows (grid-strided), the next row's X copied by cp.async while this one computes,
// so loads, arithmetic and stores overlap within an SM even with one or two rows per warp.
//
// Built on the CPU machine: nvcc -O3 -std=c++17 -arch=sm_90a [-DKILP=1|4|8] -o .diagbin/kron_lane tools/diag/kron_lane.cu
// Run: .diagbin/kron_lane ROWS WARPS_PER_BLOCK BLOCKS_PER_SM STAGES (prints device µs from a 20-launch
// graph and the error of four rows against float64); EMPTY=1 launches an empty kernel instead.
//
// Measured (session 26, H100, benchmarks/results/kron-lane-H100-2026-11-27-session26.txt): 7.5 µs
// at 1024 rows against the library's 9.0-9.1, 21.8 against 24.0-24.2 at 4096, 5.9 against 6.3-6.5
// at 16; explicit independent FMA chains (KILP) change nothing, so the arithmetic is not latency-bound
// but bound by the broadcast shared-memory reads (one float4 per 4 FMAs per lane). Not in the
// library: at 1024 rows it would still be 38% of the roofline against the 60% target (see
// docs/PERF_NOTES.md, kron session 26, for what that target asks of any fp32 kernel at that size).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                              \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      std::printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));       \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

constexpr int P = 32;
#ifndef KILP
#define KILP 4
#endif

__device__ __forceinline__ void cp16(float* dst, const float* src) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

// smem: F1ᵀ (P × P) shared by the block, then per warp two row buffers (P × P each).
template <int NSTAGE, int ILP>
__global__ void __launch_bounds__(256) kron_lane(const float* __restrict__ x, const float* __restrict__ f1,
                                                 const float* __restrict__ f2, float* __restrict__ y, int rows) {
  extern __shared__ __align__(16) float sm[];
  float* f1t = sm;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int nwarps = blockDim.x / 32;
  float* buf = sm + P * P + warp * NSTAGE * P * P;
  const int gw = blockIdx.x * nwarps + warp, tw = gridDim.x * nwarps;
  auto load = [&](int r, int st) {
    const float* src = x + static_cast<long long>(r) * P * P;
    float* dst = buf + st * P * P;
#pragma unroll
    for (int c = 0; c < P * P / 4 / 32; ++c) cp16(dst + (c * 32 + lane) * 4, src + (c * 32 + lane) * 4);
  };
  int r = gw;
  if (r < rows) load(r, 0);  // the first row's copy before the factors: their latencies overlap
  cp_commit();
  for (int e = threadIdx.x; e < P * P; e += blockDim.x) {
    const int a = e / P, i = e % P;
    f1t[i * P + a] = f1[e];  // F1ᵀ[i][a] = F1[a][i]
  }
  float f2r[P];
#pragma unroll
  for (int b = 0; b < P; ++b) f2r[b] = f2[b * P + lane];
  __syncthreads();
  for (int it = 0; r < rows; ++it, r += tw) {
    const int st = NSTAGE == 1 ? 0 : it % NSTAGE;
    if (NSTAGE > 1) {
      if (r + tw < rows) load(r + tw, (it + 1) % NSTAGE);
      cp_commit();
      cp_wait<1>();
    } else {
      cp_wait<0>();
    }
    __syncwarp();
    const float* X = buf + st * P * P;
    float t[P];
    // ILP independent chains: rows a … a + ILP − 1 of T at once (one chain of P FMAs each would
    // wait 4 cycles per FMA).
#pragma unroll
    for (int a0 = 0; a0 < P; a0 += ILP) {
      float acc[ILP];
#pragma unroll
      for (int u = 0; u < ILP; ++u) acc[u] = 0.f;
#pragma unroll
      for (int b4 = 0; b4 < P / 4; ++b4) {
#pragma unroll
        for (int u = 0; u < ILP; ++u) {
          const float4 v = *reinterpret_cast<const float4*>(X + (a0 + u) * P + b4 * 4);
          acc[u] = fmaf(v.x, f2r[b4 * 4 + 0], acc[u]);
          acc[u] = fmaf(v.y, f2r[b4 * 4 + 1], acc[u]);
          acc[u] = fmaf(v.z, f2r[b4 * 4 + 2], acc[u]);
          acc[u] = fmaf(v.w, f2r[b4 * 4 + 3], acc[u]);
        }
      }
#pragma unroll
      for (int u = 0; u < ILP; ++u) t[a0 + u] = acc[u];
    }
    __syncwarp();  // every lane has read X before the buffer is refilled (NSTAGE == 1: next row)
    if (NSTAGE == 1 && r + tw < rows) {
      load(r + tw, 0);
      cp_commit();
    }
    float* yr = y + static_cast<long long>(r) * P * P;
#pragma unroll
    for (int i0 = 0; i0 < P; i0 += ILP) {
      float acc[ILP];
#pragma unroll
      for (int u = 0; u < ILP; ++u) acc[u] = 0.f;
#pragma unroll
      for (int a4 = 0; a4 < P / 4; ++a4) {
#pragma unroll
        for (int u = 0; u < ILP; ++u) {
          const float4 v = *reinterpret_cast<const float4*>(f1t + (i0 + u) * P + a4 * 4);
          acc[u] = fmaf(v.x, t[a4 * 4 + 0], acc[u]);
          acc[u] = fmaf(v.y, t[a4 * 4 + 1], acc[u]);
          acc[u] = fmaf(v.z, t[a4 * 4 + 2], acc[u]);
          acc[u] = fmaf(v.w, t[a4 * 4 + 3], acc[u]);
        }
      }
#pragma unroll
      for (int u = 0; u < ILP; ++u) __stcs(yr + (i0 + u) * P + lane, acc[u]);
    }
  }
}


// Variant 2 ("half"): a half-warp per row, lane l of the half owning columns l and l + 16, so each
// broadcast float4 (of X in the first step: one address per half-warp; of F1ᵀ in the second: one per
// warp) feeds 8 FMAs instead of 4. A warp streams row pairs; per warp NSTAGE buffers of two rows.
template <int NSTAGE>
__global__ void __launch_bounds__(256) kron_half(const float* __restrict__ x, const float* __restrict__ f1,
                                                 const float* __restrict__ f2, float* __restrict__ y, int rows) {
  extern __shared__ __align__(16) float sm[];
  float* f1t = sm;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int half = lane >> 4, hl = lane & 15;
  const int nwarps = blockDim.x / 32;
  float* buf = sm + P * P + warp * NSTAGE * 2 * P * P;
  const int gw = blockIdx.x * nwarps + warp, tw = gridDim.x * nwarps;  // row pairs
  const int pairs = (rows + 1) / 2;
  auto load = [&](int pr, int st) {  // this half's row of pair pr into stage st
    const int r = 2 * pr + half;
    float* dst = buf + (st * 2 + half) * P * P;
    if (r < rows) {
      const float* src = x + static_cast<long long>(r) * P * P;
#pragma unroll
      for (int c = 0; c < P * P / 4 / 16; ++c) cp16(dst + (c * 16 + hl) * 4, src + (c * 16 + hl) * 4);
    }
  };
  int pr = gw;
  if (pr < pairs) load(pr, 0);
  cp_commit();
  for (int e = threadIdx.x; e < P * P; e += blockDim.x) {
    const int a = e / P, i = e % P;
    f1t[i * P + a] = f1[e];
  }
  float f2a[P], f2b[P];
#pragma unroll
  for (int b = 0; b < P; ++b) f2a[b] = f2[b * P + hl], f2b[b] = f2[b * P + hl + 16];
  __syncthreads();
  for (int it = 0; pr < pairs; ++it, pr += tw) {
    const int st = NSTAGE == 1 ? 0 : it % NSTAGE;
    if (NSTAGE > 1) {
      if (pr + tw < pairs) load(pr + tw, (it + 1) % NSTAGE);
      cp_commit();
      cp_wait<1>();
    } else {
      cp_wait<0>();
    }
    __syncwarp();
    const float* X = buf + (st * 2 + half) * P * P;
    float ta[P], tb[P];
#pragma unroll
    for (int a = 0; a < P; ++a) {
      float acc0 = 0.f, acc1 = 0.f;
#pragma unroll
      for (int b4 = 0; b4 < P / 4; ++b4) {
        const float4 v = *reinterpret_cast<const float4*>(X + a * P + b4 * 4);
        acc0 = fmaf(v.x, f2a[b4 * 4 + 0], acc0); acc1 = fmaf(v.x, f2b[b4 * 4 + 0], acc1);
        acc0 = fmaf(v.y, f2a[b4 * 4 + 1], acc0); acc1 = fmaf(v.y, f2b[b4 * 4 + 1], acc1);
        acc0 = fmaf(v.z, f2a[b4 * 4 + 2], acc0); acc1 = fmaf(v.z, f2b[b4 * 4 + 2], acc1);
        acc0 = fmaf(v.w, f2a[b4 * 4 + 3], acc0); acc1 = fmaf(v.w, f2b[b4 * 4 + 3], acc1);
      }
      ta[a] = acc0, tb[a] = acc1;
    }
    __syncwarp();
    if (NSTAGE == 1 && pr + tw < pairs) {
      load(pr + tw, 0);
      cp_commit();
    }
    const int r = 2 * pr + half;
    float* yr = y + static_cast<long long>(r) * P * P;
#pragma unroll
    for (int i = 0; i < P; ++i) {
      float acc0 = 0.f, acc1 = 0.f;
#pragma unroll
      for (int a4 = 0; a4 < P / 4; ++a4) {
        const float4 v = *reinterpret_cast<const float4*>(f1t + i * P + a4 * 4);
        acc0 = fmaf(v.x, ta[a4 * 4 + 0], acc0); acc1 = fmaf(v.x, tb[a4 * 4 + 0], acc1);
        acc0 = fmaf(v.y, ta[a4 * 4 + 1], acc0); acc1 = fmaf(v.y, tb[a4 * 4 + 1], acc1);
        acc0 = fmaf(v.z, ta[a4 * 4 + 2], acc0); acc1 = fmaf(v.z, tb[a4 * 4 + 2], acc1);
        acc0 = fmaf(v.w, ta[a4 * 4 + 3], acc0); acc1 = fmaf(v.w, tb[a4 * 4 + 3], acc1);
      }
      if (r < rows) {
        __stcs(yr + i * P + hl, acc0);
        __stcs(yr + i * P + hl + 16, acc1);
      }
    }
  }
}

__global__ void empty_kernel() {}

int main(int argc, char** argv) {
  const int rows = argc > 1 ? std::atoi(argv[1]) : 1024;
  const int wpb = argc > 2 ? std::atoi(argv[2]) : 4;
  const int bps = argc > 3 ? std::atoi(argv[3]) : 2;
  const int nstage = argc > 4 ? std::atoi(argv[4]) : 2;
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const std::size_t n = static_cast<std::size_t>(rows) * P * P;
  std::vector<float> hx(n), hf1(P * P), hf2(P * P), hy(n);
  unsigned s = 12345;
  auto rnd = [&] { s = s * 1664525u + 1013904223u; return (static_cast<int>(s >> 8) % 2001 - 1000) / 1000.0f; };
  for (auto& v : hx) v = rnd();
  for (auto& v : hf1) v = rnd() / std::sqrt(float(P));
  for (auto& v : hf2) v = rnd() / std::sqrt(float(P));
  float *dx, *df1, *df2, *dy;
  CK(cudaMalloc(&dx, n * 4)); CK(cudaMalloc(&dy, n * 4)); CK(cudaMalloc(&df1, P * P * 4)); CK(cudaMalloc(&df2, P * P * 4));
  CK(cudaMemcpy(dx, hx.data(), n * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(df1, hf1.data(), P * P * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(df2, hf2.data(), P * P * 4, cudaMemcpyHostToDevice));
  const bool half_rows = std::getenv("HALF") != nullptr;
  const int warps_needed = half_rows ? (rows + 1) / 2 : rows;
  int grid = std::min((warps_needed + wpb - 1) / wpb, sms * bps);
  const std::size_t smem = (P * P + static_cast<std::size_t>(wpb) * nstage * P * P * (half_rows ? 2 : 1)) * 4;
  const bool empty = std::getenv("EMPTY") != nullptr;
  const bool halfv = std::getenv("HALF") != nullptr;  // variant 2: a half-warp per row  // calibration: a kernel that does nothing
  auto launch = [&](cudaStream_t st) {
    if (empty) {
      empty_kernel<<<grid, wpb * 32, 0, st>>>();
    } else if (halfv) {
      if (nstage == 2) kron_half<2><<<grid, wpb * 32, smem, st>>>(dx, df1, df2, dy, rows);
      else kron_half<1><<<grid, wpb * 32, smem, st>>>(dx, df1, df2, dy, rows);
    } else if (nstage == 2) {
      kron_lane<2, KILP><<<grid, wpb * 32, smem, st>>>(dx, df1, df2, dy, rows);
    } else {
      kron_lane<1, KILP><<<grid, wpb * 32, smem, st>>>(dx, df1, df2, dy, rows);
    }
  };
  CK(cudaFuncSetAttribute(kron_lane<2, KILP>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  CK(cudaFuncSetAttribute(kron_lane<1, KILP>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  CK(cudaFuncSetAttribute(kron_half<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  CK(cudaFuncSetAttribute(kron_half<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  launch(0);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(hy.data(), dy, n * 4, cudaMemcpyDeviceToHost));
  // float64 reference on a few rows
  double maxerr = 0, maxref = 0;
  for (int r : {0, 1, rows / 2, rows - 1}) {
    for (int i = 0; i < P; ++i)
      for (int j = 0; j < P; ++j) {
        double acc = 0;
        for (int a = 0; a < P; ++a)
          for (int b = 0; b < P; ++b) acc += double(hx[(std::size_t)r * P * P + a * P + b]) * hf1[a * P + i] * hf2[b * P + j];
        maxerr = std::fmax(maxerr, std::fabs(acc - hy[(std::size_t)r * P * P + i * P + j]));
        maxref = std::fmax(maxref, std::fabs(acc));
      }
  }
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  for (int k = 0; k < 20; ++k) launch(st);
  CK(cudaStreamEndCapture(st, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  for (int k = 0; k < 5; ++k) CK(cudaGraphLaunch(ge, st));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  float best = 1e30f;
  for (int rep = 0; rep < 10; ++rep) {
    CK(cudaEventRecord(e0, st));
    CK(cudaGraphLaunch(ge, st));
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    best = std::fmin(best, ms);
  }
  std::printf("%srows %d warps/block %d blocks/SM %d stages %d grid %d smem %zu: %.2f us per call (best of 10 graphs of 20), rel err %.2e\n",
              half_rows ? "half: " : "", rows, wpb, bps, nstage, grid, smem, best * 1000 / 20, maxerr / maxref);
  return 0;
}
