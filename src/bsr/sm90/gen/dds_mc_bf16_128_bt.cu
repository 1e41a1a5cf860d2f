// One explicit instantiation of the sm_90a cluster (multicast) dds kernel (see ../dds_mc_sm90.cuh).
#include "../dds_mc_sm90.cuh"

namespace sparsekern::bsr::sm90 {
template bool dds_mc_launch<Elem::bf16, 128, true>(const tc::TcParams&, int, int, void*);
}  // namespace sparsekern::bsr::sm90
