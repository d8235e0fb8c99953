# Installs the sdnn build tree into <build>/install-tree, then configures, builds and
# runs the consumer project in tests/install/consumer against the installed package.
set(prefix ${SDNN_BINARY_DIR}/install-tree)
set(cbin ${SDNN_BINARY_DIR}/install-consumer)
file(REMOVE_RECURSE ${prefix} ${cbin})

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}")
  endif()
endfunction()

run(${CMAKE_COMMAND} --install ${SDNN_BINARY_DIR} --prefix ${prefix})
run(${CMAKE_COMMAND} -S ${SDNN_SOURCE_DIR}/tests/install/consumer -B ${cbin} -G ${CMAKE_GENERATOR}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release -DCONSUMER_CUDA=${SDNN_ENABLE_CUDA}
    -DCMAKE_CUDA_ARCHITECTURES=${CMAKE_CUDA_ARCHITECTURES})
run(${CMAKE_COMMAND} --build ${cbin})
run(${cbin}/consumer_cpp)
if(SDNN_ENABLE_CUDA)
  run(${cbin}/consumer_cu)
endif()
