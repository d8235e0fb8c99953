# Finds cuDNN (header cudnn.h, library cudnn) next to the CUDA toolkit or on the usual
# paths, and defines the imported target sdnn::cudnn_lib. Used in the build tree and by
# the installed sdnnConfig.cmake.
if(TARGET sdnn::cudnn_lib)
  return()
endif()
set(_hints ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_TARGET_DIR} $ENV{CUDNN_ROOT} $ENV{CUDA_HOME})
find_path(SDNN_CUDNN_INCLUDE_DIR cudnn.h HINTS ${_hints} ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
find_library(SDNN_CUDNN_LIBRARY cudnn HINTS ${_hints} PATH_SUFFIXES lib64 lib lib/x64)
if(SDNN_CUDNN_INCLUDE_DIR AND SDNN_CUDNN_LIBRARY)
  add_library(sdnn::cudnn_lib UNKNOWN IMPORTED)
  set_target_properties(sdnn::cudnn_lib PROPERTIES IMPORTED_LOCATION ${SDNN_CUDNN_LIBRARY}
                                                   INTERFACE_INCLUDE_DIRECTORIES ${SDNN_CUDNN_INCLUDE_DIR})
endif()
