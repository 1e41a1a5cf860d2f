// One explicit instantiation of the sm_90a grouped block-sparse dds kernel (see ../gdds_sm90.cuh).
#include "../gdds_sm90.cuh"

namespace sparsekern::bsr::sm90 {
template bool gdds_launch<Elem::bf16, 128, false>(const tc::TcParams&, int, int, void*);
}  // namespace sparsekern::bsr::sm90
