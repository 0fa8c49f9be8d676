# The Python package: the extension `fluxion.core` is built into
# ${CMAKE_BINARY_DIR}/python/fluxion next to links to the package's pure
# Python files, so PYTHONPATH=<build>/python imports it (out-of-tree builds
# leave the source tree untouched).
#
# The interpreter: -DPython_EXECUTABLE=... when given; otherwise the first
# `python3` on PATH that can import NumPy, then /usr/bin/python3 (on Debian
# a pyenv or other python3 first on PATH often lacks the system's NumPy).
# The choice is written to <build>/python-executable for `make test`.

if(NOT Python_EXECUTABLE)
  set(_fx_candidates)
  find_program(_fx_path_python NAMES python3 python NO_CACHE)
  if(_fx_path_python)
    list(APPEND _fx_candidates ${_fx_path_python})
  endif()
  list(APPEND _fx_candidates /usr/bin/python3)
  foreach(_fx_py ${_fx_candidates})
    execute_process(COMMAND ${_fx_py} -c "import numpy"
      RESULT_VARIABLE _fx_rc OUTPUT_QUIET ERROR_QUIET)
    if(_fx_rc EQUAL 0)
      set(Python_EXECUTABLE ${_fx_py} CACHE FILEPATH
        "Python interpreter for the extension (one that has NumPy)")
      break()
    endif()
  endforeach()
endif()

find_package(Python 3.8 COMPONENTS Interpreter Development.Module)
if(NOT Python_FOUND)
  message(STATUS "Python development files not found: the Python package is not built")
  return()
endif()

# pybind11: from the interpreter's own installation (pip's pybind11 knows
# its CMake folder), else the system's (Debian's pybind11-dev).
execute_process(COMMAND ${Python_EXECUTABLE} -m pybind11 --cmakedir
  RESULT_VARIABLE _fx_rc OUTPUT_VARIABLE _fx_pybind11_dir
  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(_fx_rc EQUAL 0 AND EXISTS "${_fx_pybind11_dir}")
  list(PREPEND CMAKE_PREFIX_PATH "${_fx_pybind11_dir}")
endif()
# Use the Python found above (FindPython), not pybind11's own search.
set(PYBIND11_FINDPYTHON ON)
find_package(pybind11 CONFIG)
if(NOT pybind11_FOUND)
  message(STATUS "pybind11 not found: the Python package is not built")
  return()
endif()
message(STATUS "Python package for ${Python_EXECUTABLE} (pybind11 ${pybind11_VERSION})")
file(WRITE ${CMAKE_BINARY_DIR}/python-executable "${Python_EXECUTABLE}\n")

file(GLOB PY_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/python/src/*.cpp)
# NO_EXTRAS: no link-time optimisation (a slow serial link) and no strip.
pybind11_add_module(core NO_EXTRAS ${PY_SOURCES})
target_link_libraries(core PRIVATE fluxion)
# Export PyInit_core only (see core.map for why).
set(_fx_map ${CMAKE_SOURCE_DIR}/python/src/core.map)
target_link_options(core PRIVATE "LINKER:--version-script=${_fx_map}")
set_property(TARGET core APPEND PROPERTY LINK_DEPENDS ${_fx_map})
target_compile_options(core PRIVATE ${FLUXION_WARNINGS})
# fluxion.core.__version__; on module.cpp only, so that no other file's
# command line (and ccache entry) changes with the version.
set_property(SOURCE ${CMAKE_SOURCE_DIR}/python/src/module.cpp APPEND PROPERTY
  COMPILE_DEFINITIONS FLUXION_VERSION="${PROJECT_VERSION}")
set(PY_PKG_DIR ${CMAKE_BINARY_DIR}/python/fluxion)
set_target_properties(core PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${PY_PKG_DIR})
file(MAKE_DIRECTORY ${PY_PKG_DIR})
file(GLOB PY_FILES CONFIGURE_DEPENDS
  ${CMAKE_SOURCE_DIR}/python/fluxion/*.py
  ${CMAKE_SOURCE_DIR}/python/fluxion/*.pyi)
foreach(f ${PY_FILES})
  get_filename_component(name ${f} NAME)
  file(CREATE_LINK ${f} ${PY_PKG_DIR}/${name} SYMBOLIC)
endforeach()
# Subpackages (nn, optimizers) are linked as whole directories, so files
# added inside them need no re-configure.
file(GLOB PY_SUBDIRS LIST_DIRECTORIES true ${CMAKE_SOURCE_DIR}/python/fluxion/*)
foreach(d ${PY_SUBDIRS})
  if(IS_DIRECTORY ${d} AND EXISTS ${d}/__init__.py)
    get_filename_component(name ${d} NAME)
    file(CREATE_LINK ${d} ${PY_PKG_DIR}/${name} SYMBOLIC)
  endif()
endforeach()
