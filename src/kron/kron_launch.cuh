#pragma once
// Launching the kron kernels as programmatic dependent launches (PDL, compute capability 9.0+).
//
// A kernel launched with cudaLaunchAttributeProgrammaticStreamSerialization may start while the
// kernel before it on the stream is still running: its blocks are scheduled once every block of
// that kernel has executed griddepcontrol.launch_dependents (pdl_launch_dependents in kron_fast.h)
// or exited, and they wait at griddepcontrol.wait (pdl_wait) until that kernel has finished and its
// writes are visible. So the launch latency of the second kernel, and its blocks' start on the
// SMs, overlap the first one's last blocks. Inside a CUDA graph capture the stream edge becomes a
// programmatic graph edge. Every kernel launched through kron_launch with pdl = true calls
// pdl_wait() before its first access to global memory (the previous kernel may write what it
// reads, or read what it writes); in a plain launch the wait is a no-op.
// Which kernels (session 38, H200, graph-replayed calls): the two fp32 fused forwards, 0.2-0.5 µs
// faster per call (1024 × (32,32) 8.1 → 7.7-7.9, 16 × (32,32) 5.6 → 5.1, (8)^4 14.6 → 14.3-14.5),
// and the backward's ∂ℓ/∂F reduction (session 37). Not the fused backwards: as dependents of the
// reduction they measured no faster, and a dependent launched while the grid before it still runs
// places its blocks where room frees first, which a plan that leaves room on every SM (the
// small-factor backward runs one block fewer per SM than fit) does not survive: with the reduction
// letting the next backward launch early, 1024 × (16,16,16)'s backward took 80 µs instead of 60.
#include <cuda_runtime_api.h>

#include <cstddef>

#include "../common/cuda_check.h"

namespace sparsekern::kron::detail {

/// Waits for the grid this one is a programmatic dependent of (see the file comment).
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

/// kernel<<<grid, block, smem, s>>>(arg), as a programmatic dependent launch where `pdl`.
template <class Arg>
void kron_launch(void (*kernel)(Arg), dim3 grid, dim3 block, std::size_t smem, cudaStream_t s, bool pdl,
                 const Arg& arg) {
  if (!pdl) {
    kernel<<<grid, block, smem, s>>>(arg);
    SK_CUDA_CHECK_LAUNCH();
    return;
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  SK_CUDA_TRY(cudaLaunchKernelEx(&cfg, kernel, arg));
}

}  // namespace sparsekern::kron::detail
