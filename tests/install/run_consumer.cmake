# Installs sdnn the README's way (a fresh tree configured with -DSDNN_INSTALL_ONLY=ON, then
# `cmake --install` without building: nothing of sdnn is compiled) into <build>/install-tree,
# then configures, builds and runs the consumer project in tests/install/consumer against the
# installed package: a .cpp alone (consumer_cpp, and consumer_host_layers: the layer types on
# host_exec, not_compiled from the device path), and a .cu (consumer_cu) in CUDA builds.
set(src ${SDNN_BINARY_DIR}/install-only)
set(prefix ${SDNN_BINARY_DIR}/install-tree)
set(cbin ${SDNN_BINARY_DIR}/install-consumer)
file(REMOVE_RECURSE ${src} ${prefix} ${cbin})

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}")
  endif()
endfunction()

set(toolchain -DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER})
if(SDNN_ENABLE_CUDA)
  list(APPEND toolchain -DCMAKE_CUDA_COMPILER=${CMAKE_CUDA_COMPILER}
       -DCMAKE_CUDA_ARCHITECTURES=${CMAKE_CUDA_ARCHITECTURES})
endif()
run(${CMAKE_COMMAND} -S ${SDNN_SOURCE_DIR} -B ${src} -G ${CMAKE_GENERATOR} -DSDNN_INSTALL_ONLY=ON
    -DSDNN_ENABLE_CUDA=${SDNN_ENABLE_CUDA} ${toolchain})
foreach(d tests examples benchmarks)
  if(EXISTS ${src}/${d})
    message(FATAL_ERROR "SDNN_INSTALL_ONLY=ON configured ${d}/: an install would build it")
  endif()
endforeach()
run(${CMAKE_COMMAND} --install ${src} --prefix ${prefix})
run(${CMAKE_COMMAND} -S ${SDNN_SOURCE_DIR}/tests/install/consumer -B ${cbin} -G ${CMAKE_GENERATOR}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release -DCONSUMER_CUDA=${SDNN_ENABLE_CUDA} ${toolchain})
run(${CMAKE_COMMAND} --build ${cbin})
run(${cbin}/consumer_cpp)
run(${cbin}/consumer_host_layers)
if(SDNN_ENABLE_CUDA)
  run(${cbin}/consumer_cu)
endif()
