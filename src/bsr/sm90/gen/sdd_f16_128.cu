// One explicit instantiation of the sm_90a block-sparse sdd kernel (see ../sdd_sm90.cuh).
#include "../sdd_sm90.cuh"

namespace sparsekern::bsr::sm90 {
template bool sdd_launch<Elem::f16, 128, false>(const tc::TcParams&, int, int, int, int, void*, int, float*);
}  // namespace sparsekern::bsr::sm90
