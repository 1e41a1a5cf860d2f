# CUTLASS (header-only) is pinned to the nvidia-cutlass 4.2.0.0 Python package, whose
# cutlass_library/source/include holds the C++ headers. Nothing is vendored or downloaded: either
#   -DSPARSEKERN_CUTLASS_DIR=<dir containing cutlass/cutlass.h>, or
#   pip install --no-deps nvidia-cutlass==4.2.0.0   (found through the build's Python).
# Defines the INTERFACE target sparsekern_cutlass.

set(SPARSEKERN_CUTLASS_VERSION "4.2.0" CACHE INTERNAL "pinned CUTLASS version")
set(SPARSEKERN_CUTLASS_DIR "" CACHE PATH "Directory holding cutlass/cutlass.h (default: from the nvidia-cutlass Python package)")

if(NOT SPARSEKERN_CUTLASS_DIR)
  find_package(Python COMPONENTS Interpreter QUIET)
  if(Python_EXECUTABLE)
    execute_process(
      COMMAND "${Python_EXECUTABLE}" -c
              "import importlib.util as u, os; s = u.find_spec('cutlass_library'); print(os.path.join(os.path.dirname(s.origin), 'source', 'include'))"
      OUTPUT_VARIABLE _sk_cutlass_dir OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _rc)
    if(_rc EQUAL 0 AND EXISTS "${_sk_cutlass_dir}/cutlass/cutlass.h")
      set(SPARSEKERN_CUTLASS_DIR "${_sk_cutlass_dir}" CACHE PATH "" FORCE)
    endif()
  endif()
endif()
if(NOT EXISTS "${SPARSEKERN_CUTLASS_DIR}/cutlass/cutlass.h")
  if(NOT SPARSEKERN_CUDA STREQUAL "ON")  # AUTO: the top level falls back to the CPU-only library
    list(APPEND SPARSEKERN_CUDA_MISSING "CUTLASS ${SPARSEKERN_CUTLASS_VERSION} headers")
    return()
  endif()
  message(FATAL_ERROR "sparsekern: CUTLASS ${SPARSEKERN_CUTLASS_VERSION} headers not found. Run "
                      "'pip install --no-deps nvidia-cutlass==4.2.0.0' in the build's Python, or pass "
                      "-DSPARSEKERN_CUTLASS_DIR=<dir with cutlass/cutlass.h>.")
endif()

# Check the pin: cutlass/version.h defines CUTLASS_MAJOR/MINOR/PATCH.
file(STRINGS "${SPARSEKERN_CUTLASS_DIR}/cutlass/version.h" _sk_cv REGEX "#define CUTLASS_(MAJOR|MINOR|PATCH) ")
string(REGEX REPLACE ".*CUTLASS_MAJOR ([0-9]+).*CUTLASS_MINOR ([0-9]+).*CUTLASS_PATCH ([0-9]+).*" "\\1.\\2.\\3" _sk_found "${_sk_cv}")
if(NOT _sk_found VERSION_EQUAL SPARSEKERN_CUTLASS_VERSION)
  message(FATAL_ERROR "sparsekern: CUTLASS ${SPARSEKERN_CUTLASS_VERSION} required, found ${_sk_found} at ${SPARSEKERN_CUTLASS_DIR}")
endif()
message(STATUS "sparsekern: CUTLASS ${_sk_found} at ${SPARSEKERN_CUTLASS_DIR}")

add_library(sparsekern_cutlass INTERFACE)
target_include_directories(sparsekern_cutlass SYSTEM INTERFACE "${SPARSEKERN_CUTLASS_DIR}")
