# cmake --install [--prefix DIR]: the public headers (fluxion/*.h,
# fluxion/ops/*.h; the backends' headers are internal), libfluxion,
# FluxionConfig.cmake + FluxionConfigVersion.cmake exporting
# Fluxion::fluxion, and fluxion.pc. Both description files find the prefix
# from where they lie, so an installed tree can be moved (and CI installs
# into the build folder with --prefix).
#
# The installed library is shared unless FLUXION_INSTALL_SHARED=OFF (or
# BUILD_SHARED_LIBS=OFF): then it is the static archive the build links
# in-tree. The shared one is linked from that archive's objects (all
# position-independent already), so it costs one link and no compile; the
# tests, benchmarks and the Python extension keep the static archive
# (docs/architecture.md, "Decisions": why).

if(DEFINED BUILD_SHARED_LIBS)
  set(_fx_shared_default ${BUILD_SHARED_LIBS})
else()
  set(_fx_shared_default ON)
endif()
option(FLUXION_INSTALL_SHARED
  "Install libfluxion as a shared library (OFF: the static archive)"
  ${_fx_shared_default})

if(FLUXION_INSTALL_SHARED)
  add_library(fluxion_shared SHARED $<TARGET_OBJECTS:fluxion>)
  if(FLUXION_CUDA_ENABLED)
    target_sources(fluxion_shared PRIVATE $<TARGET_OBJECTS:fluxion_cuda>)
  endif()
  target_include_directories(fluxion_shared PUBLIC
    $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_features(fluxion_shared PUBLIC cxx_std_20)
  target_link_libraries(fluxion_shared PUBLIC Threads::Threads
    PRIVATE ${FLUXION_PRIVATE_LIBS})
  # --no-undefined: a dependency missing from FLUXION_PRIVATE_LIBS fails
  # this link instead of a consumer's. 0.x: the ABI may change with each
  # minor version, so the soname carries it.
  target_link_options(fluxion_shared PRIVATE LINKER:--no-undefined)
  set_target_properties(fluxion_shared PROPERTIES
    OUTPUT_NAME fluxion EXPORT_NAME fluxion
    VERSION ${PROJECT_VERSION}
    SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
  # The system's libraries are found by the loader (Debian's alternatives
  # choose the OpenBLAS variant); the CUDA toolkit's usually are not.
  if(FLUXION_CUDA_ENABLED)
    set_target_properties(fluxion_shared PROPERTIES
      INSTALL_RPATH ${CUDAToolkit_LIBRARY_DIR})
  endif()
  set(_fx_installed fluxion_shared)
else()
  set_target_properties(fluxion PROPERTIES EXPORT_NAME fluxion)
  set(_fx_installed fluxion)
endif()

install(TARGETS ${_fx_installed} EXPORT FluxionTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/fluxion/
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/fluxion
  FILES_MATCHING PATTERN "*.h"
  PATTERN "backend" EXCLUDE)

set(_fx_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/Fluxion)
install(EXPORT FluxionTargets NAMESPACE Fluxion:: DESTINATION ${_fx_cmake_dir})
include(CMakePackageConfigHelpers)
# What FluxionConfig.cmake must find for a consumer's link: for the static
# archive, every private dependency (FLUXION_PRIVATE_LIBS) is the
# consumer's; the shared library resolves its own. FLUXION_PC_MODULES are
# those found through pkg-config (imported as PkgConfig::<NAME>).
if(FLUXION_INSTALL_SHARED)
  set(FLUXION_CONFIG_STATIC OFF)
else()
  set(FLUXION_CONFIG_STATIC ON)
endif()
set(FLUXION_PC_MODULES openblas)
if(FLUXION_VMATH STREQUAL "SLEEF")
  list(APPEND FLUXION_PC_MODULES sleef)
endif()
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/FluxionConfig.cmake.in
  ${CMAKE_BINARY_DIR}/generated/FluxionConfig.cmake
  INSTALL_DESTINATION ${_fx_cmake_dir})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/generated/FluxionConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/generated/FluxionConfig.cmake
  ${CMAKE_BINARY_DIR}/generated/FluxionConfigVersion.cmake
  DESTINATION ${_fx_cmake_dir})

# fluxion.pc: the prefix relative to the file (${pcfiledir}). The static
# archive's consumers also need its dependencies (pkg-config --static).
file(RELATIVE_PATH FLUXION_PC_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" FLUXION_PC_PREFIX ${FLUXION_PC_PREFIX})
set(FLUXION_PC_REQUIRES_PRIVATE "")
set(FLUXION_PC_LIBS_PRIVATE "")
if(NOT FLUXION_INSTALL_SHARED)
  list(JOIN FLUXION_PC_MODULES " " FLUXION_PC_REQUIRES_PRIVATE)
  string(APPEND FLUXION_PC_REQUIRES_PRIVATE " zlib")
  set(FLUXION_PC_LIBS_PRIVATE "-llapacke")
  if(FLUXION_VMATH STREQUAL "LIBMVEC")
    string(APPEND FLUXION_PC_LIBS_PRIVATE " -lmvec")
  endif()
  foreach(_fx_lib ${CMAKE_DL_LIBS})
    string(APPEND FLUXION_PC_LIBS_PRIVATE " -l${_fx_lib}")
  endforeach()
  if(FLUXION_CUDA_ENABLED)
    string(APPEND FLUXION_PC_LIBS_PRIVATE
      " -L${CUDAToolkit_LIBRARY_DIR} -lcudart -lcublasLt -lcufft -lcublas -lcusolver")
  endif()
endif()
configure_file(${CMAKE_SOURCE_DIR}/cmake/fluxion.pc.in
  ${CMAKE_BINARY_DIR}/generated/fluxion.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/generated/fluxion.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
