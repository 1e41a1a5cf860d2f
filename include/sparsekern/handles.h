#pragma once
/// @file handles.h
/// @brief Lifetime control of the cuBLAS / cuSPARSE handles sparsekern uses internally.
///
/// Handles are created lazily, one per (device, thread), the first time an op needs one; each call
/// binds the handle to the caller's stream and workspace. A thread that exits returns its handles
/// to a pool that later threads reuse. These functions only tune that lifetime: none of them has
/// to be called, and they may be called in any order, any number of times.

#include <sparsekern/types.h>

namespace sparsekern::handles {

/// Creates the calling thread's cuBLAS handle for `device` now instead of at the first op (so the
/// creation cost stays out of timings). Throws BackendUnavailable without CUDA.
void init_cublas(Device device);

/// Destroys every pooled cuBLAS and cuSPARSE handle of every thread. Later ops create new ones.
/// Must not run concurrently with ops on other threads.
void destroy_all();

/// Number of live handles (cuBLAS + cuSPARSE, all devices and threads); for tests and diagnostics.
int live_handle_count();

}  // namespace sparsekern::handles
