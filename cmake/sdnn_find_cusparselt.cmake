# Finds cuSPARSELt (header cusparseLt.h, library libcusparseLt.so[.0]) and defines the imported
# target sdnn::cusparselt_lib, which carries SDNN_HAS_CUSPARSELT=1 (the guard of
# include/sdnn/linear/vendor/cusparselt.cuh). Looked for, in order: the cache path
# SDNN_CUSPARSELT_ROOT (a folder holding include/ and lib/, e.g. the nvidia/cusparselt folder of
# the Python package nvidia-cusparselt-cu13), the folder that package has in python3's
# site-packages, then the CUDA toolkit and the usual system paths. When nothing is found it says
# so in one line and the cuSPARSELt baseline is left out of the tests and benchmarks.
if(TARGET sdnn::cusparselt_lib)
  return()
endif()

set(SDNN_CUSPARSELT_ROOT "" CACHE PATH
    "Folder with include/cusparseLt.h and lib/libcusparseLt.so* (empty: ask python3 for nvidia.cusparselt)")

set(_sdnn_lt_hints ${SDNN_CUSPARSELT_ROOT})
if(NOT SDNN_CUSPARSELT_ROOT)
  find_program(SDNN_PYTHON3 NAMES python3 DOC "python3 asked where the nvidia-cusparselt package lives")
  if(SDNN_PYTHON3)
    # nvidia.cusparselt may be a namespace package (no __file__): take its __path__.
    execute_process(
      COMMAND ${SDNN_PYTHON3} -c "import nvidia.cusparselt as m; print(list(m.__path__)[0])"
      OUTPUT_VARIABLE _sdnn_lt_py OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _sdnn_lt_rc)
    if(_sdnn_lt_rc EQUAL 0 AND _sdnn_lt_py)
      list(APPEND _sdnn_lt_hints ${_sdnn_lt_py})
    endif()
  endif()
endif()
list(APPEND _sdnn_lt_hints ${CUDAToolkit_TARGET_DIR} ${CUDAToolkit_LIBRARY_DIR}/.. $ENV{CUSPARSELT_ROOT} $ENV{CUDA_HOME})

find_path(SDNN_CUSPARSELT_INCLUDE_DIR cusparseLt.h HINTS ${_sdnn_lt_hints} ${CUDAToolkit_INCLUDE_DIRS}
          PATH_SUFFIXES include)
# The wheel ships only the versioned file libcusparseLt.so.0: look for it by its full name too.
find_library(SDNN_CUSPARSELT_LIBRARY NAMES cusparseLt libcusparseLt.so.0 HINTS ${_sdnn_lt_hints}
             PATH_SUFFIXES lib lib64 lib/x64)

if(SDNN_CUSPARSELT_INCLUDE_DIR AND SDNN_CUSPARSELT_LIBRARY)
  add_library(sdnn::cusparselt_lib UNKNOWN IMPORTED)
  set_target_properties(sdnn::cusparselt_lib PROPERTIES
    IMPORTED_LOCATION ${SDNN_CUSPARSELT_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${SDNN_CUSPARSELT_INCLUDE_DIR}
    INTERFACE_COMPILE_DEFINITIONS SDNN_HAS_CUSPARSELT=1)
  if(TARGET CUDA::cusparse)  # cusparseLt.h includes cusparse.h and uses its status type
    set_property(TARGET sdnn::cusparselt_lib APPEND PROPERTY INTERFACE_LINK_LIBRARIES CUDA::cusparse)
  endif()
  get_filename_component(_sdnn_lt_libdir ${SDNN_CUSPARSELT_LIBRARY} DIRECTORY)
  # A library outside the system paths (site-packages): executables find it at run time.
  set_property(TARGET sdnn::cusparselt_lib APPEND PROPERTY INTERFACE_LINK_OPTIONS "LINKER:-rpath,${_sdnn_lt_libdir}")
  message(STATUS "sdnn: cuSPARSELt found: ${SDNN_CUSPARSELT_LIBRARY}")
else()
  message(STATUS "sdnn: cuSPARSELt not found (set SDNN_CUSPARSELT_ROOT to the folder holding include/cusparseLt.h "
                 "and lib/libcusparseLt.so.0): its baseline is left out")
endif()
unset(_sdnn_lt_hints)
