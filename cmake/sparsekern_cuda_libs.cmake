# Locates the CUDA math libraries libsparsekern links: cuBLAS and cuSPARSE.
#
# A full CUDA toolkit provides CUDA::cublas / CUDA::cusparse. A machine with only nvcc and the CUDA
# runtime (CI, and the manylinux containers of cibuildwheel) gets them from NVIDIA's PyPI wheels
# (nvidia-cublas, nvidia-cusparse), which ship headers and versioned .so files (no unversioned
# libcublas.so symlink) under site-packages/nvidia/cu13/{include,lib}. The SONAME is the same either
# way, so one wheel runs against the toolkit's copy or the pip wheel's copy.
#
# Defines: sparsekern_cublas, sparsekern_cusparse (INTERFACE targets), SPARSEKERN_CUDA_LIB_DIRS.
# A library not found is an error with SPARSEKERN_CUDA=ON; with AUTO it is appended to
# SPARSEKERN_CUDA_MISSING and the top-level CMakeLists builds the CPU-only library instead (an sdist
# installed on a machine that has nvcc but not these wheels).

if(SPARSEKERN_CUDA STREQUAL "ON")
  find_package(CUDAToolkit REQUIRED)
else()
  find_package(CUDAToolkit QUIET)
  if(NOT CUDAToolkit_FOUND)
    list(APPEND SPARSEKERN_CUDA_MISSING "the CUDA toolkit's runtime")
  endif()
endif()

set(SPARSEKERN_CUDA_LIB_DIRS "")
set(_sk_wheel_roots "")
if(NOT DEFINED SPARSEKERN_NVIDIA_WHEEL_ROOT)
  find_package(Python COMPONENTS Interpreter QUIET)
  if(Python_EXECUTABLE)
    execute_process(
      COMMAND "${Python_EXECUTABLE}" -c
              "import nvidia, os; print(';'.join(os.path.join(p, d) for p in nvidia.__path__ for d in ('cu13', 'cublas', 'cusparse')))"
      OUTPUT_VARIABLE _sk_wheel_roots OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  endif()
else()
  set(_sk_wheel_roots "${SPARSEKERN_NVIDIA_WHEEL_ROOT}")
endif()

function(_sk_find_cuda_lib target toolkit_target libname header)
  add_library(${target} INTERFACE)
  if(TARGET ${toolkit_target})
    get_target_property(_loc ${toolkit_target} IMPORTED_LOCATION)
    if(_loc AND EXISTS "${_loc}")
      target_link_libraries(${target} INTERFACE ${toolkit_target})
      message(STATUS "sparsekern: ${libname} from the CUDA toolkit (${_loc})")
      return()
    endif()
  endif()
  find_path(_sk_inc_${libname} ${header} PATHS ${_sk_wheel_roots} PATH_SUFFIXES include NO_DEFAULT_PATH)
  set(_sk_lib "")
  if(_sk_inc_${libname})
    file(GLOB _sk_libs LIST_DIRECTORIES false "${_sk_inc_${libname}}/../lib/lib${libname}.so*")
    if(_sk_libs)
      list(SORT _sk_libs)
      list(GET _sk_libs 0 _sk_lib)  # shortest name: libX.so or libX.so.N
    endif()
  endif()
  if(NOT _sk_lib)
    set(_msg "sparsekern: ${libname} not found in the CUDA toolkit nor in NVIDIA's Python wheels "
             "(pip install nvidia-cublas nvidia-cusparse), or pass "
             "-DSPARSEKERN_NVIDIA_WHEEL_ROOT=<site-packages>/nvidia/cu13")
    if(SPARSEKERN_CUDA STREQUAL "ON")
      message(FATAL_ERROR ${_msg})
    endif()
    set(SPARSEKERN_CUDA_MISSING ${SPARSEKERN_CUDA_MISSING} "${libname}" PARENT_SCOPE)
    return()
  endif()
  cmake_path(NORMAL_PATH _sk_lib)
  get_filename_component(_dir "${_sk_lib}" DIRECTORY)
  # Headers are for our own sources only; a static build exports this target without them.
  target_include_directories(${target} INTERFACE "$<BUILD_INTERFACE:${_sk_inc_${libname}}>")
  target_link_libraries(${target} INTERFACE "${_sk_lib}")
  set(SPARSEKERN_CUDA_LIB_DIRS ${SPARSEKERN_CUDA_LIB_DIRS} "${_dir}" PARENT_SCOPE)
  message(STATUS "sparsekern: ${libname} from NVIDIA's wheel (${_sk_lib})")
endfunction()

_sk_find_cuda_lib(sparsekern_cublas CUDA::cublas cublas cublas_v2.h)
_sk_find_cuda_lib(sparsekern_cusparse CUDA::cusparse cusparse cusparse.h)
list(REMOVE_DUPLICATES SPARSEKERN_CUDA_LIB_DIRS)
