# SDNN_GPU_VISIBLE: whether nvidia-smi sees a GPU on the configuring machine (decides what is
# built by default: the device test program and the benchmarks only run on a GPU machine).
# Chooses CMAKE_CUDA_ARCHITECTURES when neither the user (-D...) nor the environment
# (CUDAARCHS) set it: `native` when a GPU is visible, else 90 (Hopper). A build machine
# without a GPU therefore never fails for lack of one.
set(_sdnn_gpu_visible OFF)
find_program(SDNN_NVIDIA_SMI nvidia-smi)
if(SDNN_NVIDIA_SMI)
  execute_process(COMMAND ${SDNN_NVIDIA_SMI} -L RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_QUIET)
  if(_rc EQUAL 0 AND _out MATCHES "GPU [0-9]")
    set(_sdnn_gpu_visible ON)
  endif()
endif()
set(SDNN_GPU_VISIBLE ${_sdnn_gpu_visible})
if(DEFINED CMAKE_CUDA_ARCHITECTURES OR DEFINED ENV{CUDAARCHS})
  return()
endif()
if(_sdnn_gpu_visible)
  set(CMAKE_CUDA_ARCHITECTURES native CACHE STRING "CUDA architectures")
else()
  set(CMAKE_CUDA_ARCHITECTURES 90 CACHE STRING "CUDA architectures")
endif()
