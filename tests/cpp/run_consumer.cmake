# ctest script (cmake -P): installs the library built in SPARSEKERN_BUILD_DIR into WORK_DIR/prefix,
# then configures, builds and runs tests/consumer against that prefix. Fails on the first error.
foreach(var SPARSEKERN_BUILD_DIR CONSUMER_SOURCE_DIR WORK_DIR GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_consumer.cmake: -D${var}=... is required")
  endif()
endforeach()
# CONFIG is $<CONFIG>: empty for a single-config build without CMAKE_BUILD_TYPE, whose install rules
# then match only an empty --config.
set(config_args "")
set(build_type Release)
if(CONFIG)
  set(config_args --config "${CONFIG}")
  set(build_type "${CONFIG}")
endif()

function(step name)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer test: ${name} failed (${rc}): ${ARGN}")
  endif()
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
step(install ${CMAKE_COMMAND} --install "${SPARSEKERN_BUILD_DIR}" --prefix "${prefix}" ${config_args})

set(cuda_args "")
if(CUDA_BIN_DIR)  # a static CUDA build makes the consumer find CUDAToolkit: point it at ours
  get_filename_component(cuda_root "${CUDA_BIN_DIR}" DIRECTORY)
  list(APPEND cuda_args "-DCUDAToolkit_ROOT=${cuda_root}")
endif()
step(configure ${CMAKE_COMMAND} -S "${CONSUMER_SOURCE_DIR}" -B "${WORK_DIR}/build" -G "${GENERATOR}"
     "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" "-DCMAKE_BUILD_TYPE=${build_type}"
     "-DCMAKE_PREFIX_PATH=${prefix}" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF ${cuda_args})
step(build ${CMAKE_COMMAND} --build "${WORK_DIR}/build" --config "${build_type}")

find_program(app NAMES app PATHS "${WORK_DIR}/build" "${WORK_DIR}/build/${build_type}" NO_DEFAULT_PATH
             NO_CACHE REQUIRED)
step(run "${app}")
