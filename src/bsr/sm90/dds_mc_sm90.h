#pragma once
// The cluster (TMA multicast) variant of the sm_90a dds (dds_mc_sm90.cuh), declared apart from
// dds_sm90.h so that only the dispatcher and its own instantiations include it.
#include "dds_sm90.h"

namespace sparsekern::bsr::sm90 {

/// As dds_launch (16-bit, kBlock = 128), run by clusters of two CTAs on the same block column of
/// two row panels, each block slice loaded once per cluster (see dds_mc_sm90.cuh).
template <Elem kElem, int kBlock, bool kBKMajor>
bool dds_mc_launch(const tc::TcParams& p, int n_block_cols, int num_sms, void* stream);

}  // namespace sparsekern::bsr::sm90
