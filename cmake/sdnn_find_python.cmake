# What the Python package needs: a Python with its development headers, pybind11 (Debian's
# python3-pybind11, or pip's: `python -m pybind11 --cmakedir`) and the DLPack header (Debian's
# libdlpack-dev, or the copy inside PyTorch's include folder). Sets _sdnn_python_ok and
# _sdnn_python_missing; SDNN_DLPACK_INCLUDE_DIR and SDNN_DLPACK_ATEN for python/CMakeLists.txt.
# The interpreter: -DPython_EXECUTABLE=..., else Debian's /usr/bin/python3 where it exists (the
# one that sees Debian's numpy, scipy and pytest), else the first python3 found.
if(NOT DEFINED Python_EXECUTABLE AND EXISTS /usr/bin/python3)
  set(Python_EXECUTABLE /usr/bin/python3)
endif()
set(_sdnn_python_missing "")
find_package(Python 3.8 QUIET COMPONENTS Interpreter Development.Module)
if(NOT Python_FOUND)
  list(APPEND _sdnn_python_missing "Python 3 with its headers (apt-get install python3-dev)")
else()
  find_package(pybind11 2.6 CONFIG QUIET)
  if(NOT pybind11_FOUND)
    execute_process(COMMAND ${Python_EXECUTABLE} -m pybind11 --cmakedir OUTPUT_VARIABLE _pb_dir
                    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _pb_rc)
    if(_pb_rc EQUAL 0 AND _pb_dir)
      find_package(pybind11 2.6 CONFIG QUIET PATHS ${_pb_dir} NO_DEFAULT_PATH)
    endif()
  endif()
  if(NOT pybind11_FOUND)
    list(APPEND _sdnn_python_missing "pybind11 (apt-get install python3-pybind11)")
  endif()
  find_path(SDNN_DLPACK_INCLUDE_DIR dlpack/dlpack.h)
  set(SDNN_DLPACK_ATEN OFF)
  if(NOT SDNN_DLPACK_INCLUDE_DIR)
    execute_process(COMMAND ${Python_EXECUTABLE} -c
                            "import os, torch; print(os.path.join(os.path.dirname(torch.__file__), 'include'))"
                    OUTPUT_VARIABLE _torch_inc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _t_rc)
    if(_t_rc EQUAL 0 AND EXISTS "${_torch_inc}/ATen/dlpack.h")
      set(SDNN_DLPACK_INCLUDE_DIR ${_torch_inc} CACHE PATH "Folder holding dlpack/dlpack.h or ATen/dlpack.h" FORCE)
      set(SDNN_DLPACK_ATEN ON)
    endif()
  elseif(NOT EXISTS "${SDNN_DLPACK_INCLUDE_DIR}/dlpack/dlpack.h" AND EXISTS "${SDNN_DLPACK_INCLUDE_DIR}/ATen/dlpack.h")
    set(SDNN_DLPACK_ATEN ON)
  endif()
  if(NOT SDNN_DLPACK_INCLUDE_DIR)
    list(APPEND _sdnn_python_missing "the DLPack header (apt-get install libdlpack-dev)")
  endif()
endif()
if(_sdnn_python_missing)
  set(_sdnn_python_ok OFF)
else()
  set(_sdnn_python_ok ON)
endif()
