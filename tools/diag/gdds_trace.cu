// Where the grouped Hopper dds (src/bsr/sm90/gdds_sm90.cuh) spends a tile's time: runs its traced
// instantiation (kTrace) on a random block pattern and summarises the per-tile clock64 records.
// A diagnostic, not part of the library: built on the CPU machine by tools/diag/gdds_trace_build.sh
// and run on the device by the session scripts (tools/diag/s16_run*.sh).
//
//   gdds_trace [m k n block density schedule reps]   (defaults 8192 4096 4096 128 0.1 2 20)
//   schedule: 0 static, 2 heavy-first dynamic (sm90::Schedule)
//
// Prints the kernel time of the plain and the traced kernel (CUDA events, median of reps), then
// per-tile means in ns: the producer's claim → index windows → first loads, the consumer's wait
// for the tile's first stage, its MMA phase (split into its waits for later stages and the rest),
// its epilogue, and a straight-line fit of the tile period against the tile's k steps.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "../../src/bsr/sm90/gdds_sm90.cuh"

namespace sparsekern::detail {
// The library's error paths, reduced to a message and exit (this program links no library).
void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  std::fprintf(stderr, "CUDA error %s in %s at %s:%d\n", cudaGetErrorString(err), call, file, line);
  std::exit(2);
}
}  // namespace sparsekern::detail

namespace {

#define CK(call)                                                                        \
  do {                                                                                  \
    cudaError_t e_ = (call);                                                            \
    if (e_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s: %s (line %d)\n", #call, cudaGetErrorString(e_), __LINE__); \
      std::exit(2);                                                                     \
    }                                                                                   \
  } while (0)

using sparsekern::bsr::sm90::Elem;
using sparsekern::bsr::sm90::GddsTrace;
using Bf = cutlass::bfloat16_t;

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <int kBlock>
int launch(const sparsekern::bsr::tc::TcParams& p, int nb, int sms, cudaStream_t st, std::uint64_t* trace) {
  if (trace != nullptr)
    return sparsekern::bsr::sm90::gdds_launch_impl<Elem::bf16, kBlock, true, true>(p, nb, sms, st, trace);
  return sparsekern::bsr::sm90::gdds_launch_impl<Elem::bf16, kBlock, true, false>(p, nb, sms, st, nullptr);
}

int launch_b(int b, const sparsekern::bsr::tc::TcParams& p, int nb, int sms, cudaStream_t st, std::uint64_t* trace) {
  if (b == 32) return launch<32>(p, nb, sms, st, trace);
  if (b == 64) return launch<64>(p, nb, sms, st, trace);
  return launch<128>(p, nb, sms, st, trace);
}

}  // namespace

int main(int argc, char** argv) {
  const int m = argc > 1 ? std::atoi(argv[1]) : 8192;
  const int k = argc > 2 ? std::atoi(argv[2]) : 4096;
  const int n = argc > 3 ? std::atoi(argv[3]) : 4096;
  const int b = argc > 4 ? std::atoi(argv[4]) : 128;
  const double density = argc > 5 ? std::atof(argv[5]) : 0.1;
  const int schedule = argc > 6 ? std::atoi(argv[6]) : 2;
  const int reps = argc > 7 ? std::atoi(argv[7]) : 20;
  if ((b != 32 && b != 64 && b != 128) || k % b || n % b) {
    std::fprintf(stderr, "block 32, 64 or 128 dividing k and n\n");
    return 1;
  }
  const int kb = k / b, nb = n / b;

  // Bop = Sᵀ (BlockSparseLinear's forward): block column j of Bop lists its k blocks, each block
  // present with probability `density`, stored b × b row-major as (n, k) (read transposed).
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  std::vector<int> offsets(nb + 1, 0), indices;
  for (int j = 0; j < nb; ++j) {
    for (int i = 0; i < kb; ++i)
      if (u(rng) < density) indices.push_back(i);
    offsets[j + 1] = int(indices.size());
  }
  const int nnz = int(indices.size());
  std::vector<Bf> ha(std::size_t(m) * k), hv(std::size_t(std::max(nnz, 1)) * b * b), hb(n);
  for (auto& x : hb) x = Bf(u(rng) - 0.5f);
  for (auto& x : ha) x = Bf(u(rng) - 0.5f);
  for (auto& x : hv) x = Bf((u(rng) - 0.5f) / 16.f);

  Bf *da, *dv, *dc, *dbias;
  CK(cudaMalloc(&dbias, hb.size() * sizeof(Bf)));
  CK(cudaMemcpy(dbias, hb.data(), hb.size() * sizeof(Bf), cudaMemcpyHostToDevice));
  int *doff, *didx, *dcounter;
  CK(cudaMalloc(&da, ha.size() * sizeof(Bf)));
  CK(cudaMalloc(&dv, hv.size() * sizeof(Bf)));
  CK(cudaMalloc(&dc, std::size_t(m) * n * sizeof(Bf)));
  CK(cudaMalloc(&doff, offsets.size() * sizeof(int)));
  CK(cudaMalloc(&didx, std::max<std::size_t>(indices.size(), 1) * sizeof(int)));
  CK(cudaMalloc(&dcounter, sizeof(int)));
  CK(cudaMemcpy(da, ha.data(), ha.size() * sizeof(Bf), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dv, hv.data(), hv.size() * sizeof(Bf), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(doff, offsets.data(), offsets.size() * sizeof(int), cudaMemcpyHostToDevice));
  if (nnz) CK(cudaMemcpy(didx, indices.data(), indices.size() * sizeof(int), cudaMemcpyHostToDevice));

  sparsekern::bsr::tc::TcParams p;
  p.a = da;
  p.lda = k;
  p.c = dc;
  p.ldc = n;
  p.values = dv;
  p.bias = dbias;  // the bias path of the epilogue (BlockSparseLinear's forward has one)
  p.offsets = doff;
  p.indices = didx;
  p.m = m;
  p.a_cols = k;
  p.nnz = nnz;
  p.tile_counter = dcounter;
  p.schedule = schedule;
  p.block = b;
  p.bf16 = true;

  int dev = 0, sms = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  const int grid = std::min<long long>(sms, (long long)((m + 255) / 256) * ((nb * b + 127) / 128));
  std::uint64_t* dtrace;
  const std::size_t trace_words = std::size_t(grid) * GddsTrace::kPerCta;
  CK(cudaMalloc(&dtrace, trace_words * sizeof(std::uint64_t)));
  CK(cudaMemset(dtrace, 0, trace_words * sizeof(std::uint64_t)));

  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  auto time = [&](std::uint64_t* trace) {
    std::vector<float> t;
    for (int r = 0; r < reps + 3; ++r) {
      CK(cudaEventRecord(e0, st));
      if (launch_b(b, p, nb, sms, st, trace) == 0) {
        std::fprintf(stderr, "not launched (TMA descriptor refused)\n");
        std::exit(2);
      }
      CK(cudaEventRecord(e1, st));
      CK(cudaEventSynchronize(e1));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      if (r >= 3) t.push_back(ms * 1000.f);
    }
    return median(t);
  };
  const float t_plain = time(nullptr);
  const float t_trace = time(dtrace);
  // One more traced run into a cleared buffer: its records are the ones summarised (a dynamic
  // schedule gives a CTA a different number of tiles per run).
  CK(cudaMemset(dtrace, 0, trace_words * sizeof(std::uint64_t)));
  launch_b(b, p, nb, sms, st, dtrace);
  CK(cudaDeviceSynchronize());

  // Spot check of the traced run's output against a float64 product (catches a broken launch).
  std::vector<Bf> hc(std::size_t(m) * n);
  CK(cudaMemcpy(hc.data(), dc, hc.size() * sizeof(Bf), cudaMemcpyDeviceToHost));
  double max_err = 0, max_ref = 0;
  for (int s = 0; s < 256; ++s) {
    const int i = int(u(rng) * m) % m, c = int(u(rng) * n) % n, j = c / b, cc = c % b;
    double ref = double(float(hb[c]));
    for (int e = offsets[j]; e < offsets[j + 1]; ++e)
      for (int t = 0; t < b; ++t)
        ref += double(float(ha[std::size_t(i) * k + indices[e] * b + t])) *
               double(float(hv[std::size_t(e) * b * b + std::size_t(cc) * b + t]));
    max_err = std::max(max_err, std::abs(ref - double(float(hc[std::size_t(i) * n + c]))));
    max_ref = std::max(max_ref, std::abs(ref));
  }

  std::vector<std::uint64_t> tr(trace_words);
  CK(cudaMemcpy(tr.data(), dtrace, trace_words * sizeof(std::uint64_t), cudaMemcpyDeviceToHost));

  std::printf("gdds bf16 b=%d m=%d k=%d n=%d d=%.3f (nnz %d, %.3f) schedule %d grid %d sms %d\n", b, m, k, n,
              density, nnz, double(nnz) / (double(kb) * nb), schedule, grid, sms);
  std::printf("kernel us: plain %.1f traced %.1f; spot check max |err| %.3g (max |ref| %.3g)\n", t_plain, t_trace,
              max_err, max_ref);

  // Per-CTA clock rate from its head (clock64 span over globaltimer span of consumer 0's run).
  double sum_claim_list = 0, sum_list_issue = 0, sum_first_wait = 0, sum_mma = 0, sum_full_wait = 0, sum_epi = 0,
         sum_gap = 0, sum_empty_wait = 0, sum_lead = 0;
  long long n_rec = 0, n_gap = 0, n_late = 0, n_epi = 0;
  double epi[5] = {0, 0, 0, 0, 0};
  double sx = 0, sy = 0, sxx = 0, sxy = 0;  // tile period (ns) against steps
  std::vector<double> ends, starts;
  std::uint64_t t_min = ~0ull;
  for (int c = 0; c < grid; ++c) t_min = std::min(t_min, tr[std::size_t(c) * GddsTrace::kPerCta]);
  int tiles_seen = 0, tiles_total = 0;
  for (int c = 0; c < grid; ++c) {
    const std::uint64_t* h = &tr[std::size_t(c) * GddsTrace::kPerCta];
    const double ns_per_clk = double(h[3] - h[0]) / double(h[2] - h[1]);
    starts.push_back(double(h[0] - t_min));
    ends.push_back(double(h[3] - t_min));
    for (int it = 0; it < GddsTrace::kTiles; ++it) {
      const std::uint64_t* r = h + GddsTrace::kHead + it * GddsTrace::kFields;
      if (r[GddsTrace::kSteps] == 0) break;  // the stop stage (no steps) or past the records
      ++tiles_total;
      const std::uint64_t* nx = it + 1 < GddsTrace::kTiles ? r + GddsTrace::kFields : nullptr;
      auto ns = [&](std::uint64_t a, std::uint64_t z) { return double((long long)(z - a)) * ns_per_clk; };
      sum_claim_list += ns(r[GddsTrace::kClaim], r[GddsTrace::kListed]);
      sum_list_issue += ns(r[GddsTrace::kListed], r[GddsTrace::kIssued]);
      sum_first_wait += ns(r[GddsTrace::kWait], r[GddsTrace::kFirst]);
      sum_mma += ns(r[GddsTrace::kFirst], r[GddsTrace::kMmaDone]);
      sum_full_wait += double(r[GddsTrace::kFullWait]) * ns_per_clk;
      sum_epi += ns(r[GddsTrace::kMmaDone], r[GddsTrace::kEpiDone]);
      if (r[GddsTrace::kEpiIssued + 1] != 0) {  // the TMA-store epilogue's steps
        ++n_epi;
        epi[0] += ns(r[GddsTrace::kMmaDone], r[GddsTrace::kEpiFree]);
        epi[1] += ns(r[GddsTrace::kEpiFree], r[GddsTrace::kEpiIssued]);
        epi[2] += ns(r[GddsTrace::kEpiIssued], r[GddsTrace::kEpiFree + 1]);
        epi[3] += ns(r[GddsTrace::kEpiFree + 1], r[GddsTrace::kEpiIssued + 1]);
        epi[4] += ns(r[GddsTrace::kEpiIssued + 1], r[GddsTrace::kEpiDone]);
      }
      sum_empty_wait += double(r[GddsTrace::kEmptyWait]) * ns_per_clk;
      // Producer lead: first loads issued before the consumer started waiting (> 0) or after.
      const double lead = ns(r[GddsTrace::kIssued], r[GddsTrace::kWait]);
      sum_lead += lead;
      n_late += lead < 0;
      ++n_rec;
      if (nx != nullptr && nx[GddsTrace::kWait] != 0) {
        sum_gap += ns(r[GddsTrace::kEpiDone], nx[GddsTrace::kWait]);
        ++n_gap;
        if (nx[GddsTrace::kSteps] != 0) {
          const double period = ns(r[GddsTrace::kWait], nx[GddsTrace::kWait]);
          const double x = double(r[GddsTrace::kSteps]);
          sx += x, sy += period, sxx += x * x, sxy += x * period;
          ++tiles_seen;
        }
      }
    }
  }
  const double nr = double(std::max<long long>(n_rec, 1));
  std::printf("tiles recorded %d (periods %d)\n", tiles_total, tiles_seen);
  std::printf("per tile, ns: producer claim->windows %.0f, windows->first loads %.0f, empty waits %.0f\n",
              sum_claim_list / nr, sum_list_issue / nr, sum_empty_wait / nr);
  std::printf("per tile, ns: consumer first-stage wait %.0f, MMA phase %.0f (of it later-stage waits %.0f), "
              "epilogue %.0f, epilogue->next wait %.0f\n",
              sum_first_wait / nr, sum_mma / nr, sum_full_wait / nr, sum_epi / nr, sum_gap / std::max<long long>(n_gap, 1));
  if (n_epi > 0)
    std::printf("epilogue, ns: slot 0 free %.0f, half 0 written + issued %.0f, slot free again %.0f, half 1 written + "
                "issued %.0f, rest %.0f\n",
                epi[0] / n_epi, epi[1] / n_epi, epi[2] / n_epi, epi[3] / n_epi, epi[4] / n_epi);
  std::printf("producer's first loads issued %.0f ns before the consumer waited on average; after it in %lld of %lld tiles\n",
              sum_lead / nr, n_late, n_rec);
  if (tiles_seen > 2) {
    const double nn = tiles_seen, slope = (nn * sxy - sx * sy) / (nn * sxx - sx * sx), icpt = (sy - slope * sx) / nn;
    std::printf("tile period = %.0f ns + %.0f ns per k step (mean steps %.2f, mean period %.0f ns)\n", icpt, slope,
                sx / nn, sy / nn);
  }
  double ghz = 0;  // the SMs' mean clock over consumer 0's run (clock64 cycles per globaltimer ns)
  for (int c = 0; c < grid; ++c) {
    const std::uint64_t* h = &tr[std::size_t(c) * GddsTrace::kPerCta];
    ghz += double(h[2] - h[1]) / double(h[3] - h[0]) / grid;
  }
  std::printf("SM clock %.3f GHz (traced run)\n", ghz);
  std::sort(ends.begin(), ends.end());
  std::sort(starts.begin(), starts.end());
  std::printf("CTA starts (ns after the first): median %.0f max %.0f; ends: min %.0f median %.0f max %.0f\n",
              starts[starts.size() / 2], starts.back(), ends.front(), ends[ends.size() / 2], ends.back());
  return 0;
}
