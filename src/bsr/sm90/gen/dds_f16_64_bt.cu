// One explicit instantiation of the sm_90a block-sparse dds kernel (see ../dds_sm90.cuh).
#include "../dds_sm90.cuh"

namespace sparsekern::bsr::sm90 {
template bool dds_launch<Elem::f16, 64, true>(const tc::TcParams&, int, int, void*);
}  // namespace sparsekern::bsr::sm90
