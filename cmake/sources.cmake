# Sources of libsparsekern, one block per op family. Each family has a dispatch file, a CPU file and
# (in CUDA builds) its .cu files; explicit lists, no globbing, so a new file is a reviewed change.

target_sources(sparsekern PRIVATE
  src/common/runtime.cpp
  src/dense/gemm.cpp
  src/dense/gemm_cpu.cpp)

if(SPARSEKERN_WITH_CUDA)
  target_sources(sparsekern PRIVATE
    src/common/cuda_check.cpp
    src/common/handles.cpp
    src/dense/gemm_cuda.cu)
else()
  target_sources(sparsekern PRIVATE
    src/common/handles_nocuda.cpp)
endif()
