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

# --- csr (cuSPARSE SpMM / SDDMM) and semi (2:4 through cuSPARSELt), issue 6 -------------------
target_sources(sparsekern PRIVATE
  src/csr/spmm.cpp
  src/csr/spmm_cpu.cpp
  src/csr/sddmm.cpp
  src/csr/sddmm_cpu.cpp
  src/semi/linear.cpp)
set(SPARSEKERN_WITH_CUSPARSELT OFF)
if(SPARSEKERN_WITH_CUDA)
  target_sources(sparsekern PRIVATE
    src/csr/spmm_cuda.cu
    src/csr/sddmm_cuda.cu)
  # cuSPARSELt is dlopen'ed at run time (src/semi/cusparselt.cpp says why): only its header is
  # needed here, from the nvidia-cusparselt-cu13 wheel (site-packages/nvidia/cu13/include) or a
  # toolkit. Without it the library builds without 2:4 CUDA support and says so.
  set(SPARSEKERN_CUSPARSELT_INCLUDE_DIR "" CACHE PATH
      "Directory holding cusparseLt.h (default: searched in NVIDIA's wheels and the CUDA toolkit)")
  if(NOT SPARSEKERN_CUSPARSELT_INCLUDE_DIR)
    find_path(_sk_cusparselt_inc cusparseLt.h
      PATHS ${_sk_wheel_roots} ${CUDAToolkit_INCLUDE_DIRS}
      PATH_SUFFIXES include ../cusparselt/include NO_DEFAULT_PATH)
    if(_sk_cusparselt_inc)
      set(SPARSEKERN_CUSPARSELT_INCLUDE_DIR "${_sk_cusparselt_inc}")
    endif()
  endif()
  if(SPARSEKERN_CUSPARSELT_INCLUDE_DIR AND EXISTS "${SPARSEKERN_CUSPARSELT_INCLUDE_DIR}/cusparseLt.h")
    set(SPARSEKERN_WITH_CUSPARSELT ON)
    target_sources(sparsekern PRIVATE src/semi/cusparselt.cpp)
    set_source_files_properties(src/semi/cusparselt.cpp PROPERTIES
      INCLUDE_DIRECTORIES "${SPARSEKERN_CUSPARSELT_INCLUDE_DIR}")
    target_link_libraries(sparsekern PRIVATE ${CMAKE_DL_LIBS})
    message(STATUS "sparsekern: 2:4 (cuSPARSELt, loaded at run time) ON, header in ${SPARSEKERN_CUSPARSELT_INCLUDE_DIR}")
  else()
    message(WARNING "sparsekern: cusparseLt.h not found (pip install nvidia-cusparselt-cu13, or set "
                    "SPARSEKERN_CUSPARSELT_INCLUDE_DIR): building WITHOUT 2:4 CUDA support")
  endif()
endif()
target_compile_definitions(sparsekern PRIVATE
  SPARSEKERN_WITH_CUSPARSELT=$<BOOL:${SPARSEKERN_WITH_CUSPARSELT}>)

# inplace: row-wise in-place ops (softmax, softmax backward, layer_norm, rms_norm) and the panelled
# in-place square product.
target_sources(sparsekern PRIVATE
  src/inplace/rows.cpp
  src/inplace/rows_cpu.cpp
  src/inplace/square_matmul.cpp
  src/inplace/square_matmul_cpu.cpp)
if(SPARSEKERN_WITH_CUDA)
  target_sources(sparsekern PRIVATE
    src/inplace/softmax_cuda.cu
    src/inplace/norm_cuda.cu
    src/inplace/square_matmul_cuda.cu)
endif()

# kron: Kronecker-factored products Y = X·(F1⊗…⊗Fn), forward and backward (include/sparsekern/kron.h).
# The fused kernels are instantiated once per (direction, dtype) in their own file, so they build in
# parallel and a change to one recompiles little.
target_sources(sparsekern PRIVATE
  src/kron/kron_matmul.cpp
  src/kron/kron_plan.cpp
  src/kron/kron_matmul_cpu.cpp)
if(SPARSEKERN_WITH_CUDA)
  target_sources(sparsekern PRIVATE
    src/kron/kron_matmul_cuda.cu
    src/kron/kron_fused_fwd_f16.cu
    src/kron/kron_fused_fwd_bf16.cu
    src/kron/kron_fused_fwd_f32.cu
    src/kron/kron_fused_fwd_f64.cu
    src/kron/kron_fused_bwd_f16.cu
    src/kron/kron_fused_bwd_bf16.cu
    src/kron/kron_fused_bwd_f32.cu
    src/kron/kron_fused_bwd_f64.cu)
endif()
