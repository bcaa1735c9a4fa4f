# Installing dtorch: the headers, libdtorch.so with a versioned
# SONAME and only dt_ symbols exported, libdtorch.a, dtorch.pc and the CMake
# package (dtorchConfig.cmake: dtorch::dtorch, dtorch::dtorch_static).
# Included from CMakeLists.txt after the library targets; docs/abi.md.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# the header's DT_VERSION_* are the project's version (dt_version() is made
# from them)
file(STRINGS ${CMAKE_CURRENT_SOURCE_DIR}/include/dtorch/dtorch.h DTORCH_VERSION_LINES
     REGEX "^#define DT_VERSION_(MAJOR|MINOR|PATCH) ")
foreach(part MAJOR MINOR PATCH)
  string(REGEX MATCH "DT_VERSION_${part} ([0-9]+)" _m "${DTORCH_VERSION_LINES}")
  if(NOT CMAKE_MATCH_1 STREQUAL "${PROJECT_VERSION_${part}}")
    message(FATAL_ERROR "include/dtorch/dtorch.h: DT_VERSION_${part} is "
            "'${CMAKE_MATCH_1}' but project() says ${PROJECT_VERSION_${part}}")
  endif()
endforeach()

# libdtorch.so.1 -> libdtorch.so.1.0.0; the version script keeps the dynamic
# symbol table to dt_* (scripts/check-exports.sh checks it)
set_target_properties(dtorch PROPERTIES VERSION ${PROJECT_VERSION}
                      SOVERSION ${PROJECT_VERSION_MAJOR}
                      LINK_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/cmake/dtorch.map)
target_link_options(dtorch PRIVATE
  "LINKER:--version-script=${CMAKE_CURRENT_SOURCE_DIR}/cmake/dtorch.map")

install(FILES include/dtorch/dtorch.h include/dtorch/autograd.h include/dtorch/debug.h
              include/dtorch/sim.h include/dtorch/spmd.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/dtorch)
install(TARGETS dtorch dtorch_static
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})

# pkg-config: prefix relative to the .pc file's directory
file(RELATIVE_PATH DTORCH_PC_PREFIX_REL
     "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
string(REGEX REPLACE "/$" "" DTORCH_PC_PREFIX_REL "${DTORCH_PC_PREFIX_REL}")
# what libdtorch.a needs besides the pkg-config modules: with the CUDA
# backend built in, its objects call cudart (static) and C++ runtime hooks
set(DTORCH_PC_LIBS_PRIVATE "-lpthread -lm")
set(DTORCH_STATIC_EXTRA "")
if(DTORCH_CUDA_ENABLED)
  string(APPEND DTORCH_PC_LIBS_PRIVATE
         " ${CUDA_cudart_static_LIBRARY} -ldl -lrt -lstdc++")
  set(DTORCH_STATIC_EXTRA ";${CUDA_cudart_static_LIBRARY};dl;rt;stdc++")
endif()
# with MPI, its objects call libmpi (the consumer's program need not)
set(DTORCH_CONFIG_MPI OFF)
if(DTORCH_MPI_ENABLED)
  foreach(_lib ${MPI_C_LIBRARIES})
    string(APPEND DTORCH_PC_LIBS_PRIVATE " ${_lib}")
  endforeach()
  set(DTORCH_STATIC_EXTRA "${DTORCH_STATIC_EXTRA};MPI::MPI_C")
  set(DTORCH_CONFIG_MPI ON)
endif()
configure_file(cmake/dtorch.pc.in ${CMAKE_CURRENT_BINARY_DIR}/dtorch.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/dtorch.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

set(DTORCH_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/dtorch)
configure_package_config_file(cmake/dtorchConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/dtorchConfig.cmake
  INSTALL_DESTINATION ${DTORCH_CMAKE_DIR}
  PATH_VARS CMAKE_INSTALL_LIBDIR CMAKE_INSTALL_INCLUDEDIR)
# an ABI break bumps the major version (and the SONAME): docs/abi.md
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/dtorchConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/dtorchConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/dtorchConfigVersion.cmake
        DESTINATION ${DTORCH_CMAKE_DIR})

# the tests of the above: an install into a prefix under the build dir and
# out-of-tree builds against it (pkg-config, CMake); the export list
# (not under sanitizers: a plain consumer cannot load an instrumented library)
if(DTORCH_BUILD_TESTS AND NOT DTORCH_SANITIZE)
  add_test(NAME install_out_of_tree COMMAND
    ${CMAKE_CURRENT_SOURCE_DIR}/scripts/install-test.sh
    ${CMAKE_CURRENT_BINARY_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
  set_tests_properties(install_out_of_tree PROPERTIES
    LABELS install SKIP_RETURN_CODE 77 TIMEOUT 600)
endif()
if(DTORCH_BUILD_TESTS)
  add_test(NAME exports_only_dt COMMAND
    ${CMAKE_CURRENT_SOURCE_DIR}/scripts/check-exports.sh $<TARGET_FILE:dtorch>)
  # the check itself fails on a library that exports something else
  add_test(NAME exports_only_dt_selftest COMMAND
    ${CMAKE_CURRENT_SOURCE_DIR}/scripts/check-exports.sh --self-test)
  set_tests_properties(exports_only_dt exports_only_dt_selftest PROPERTIES
    LABELS "install;lint" SKIP_RETURN_CODE 77)
endif()
if(TARGET test_version)
  target_compile_definitions(test_version PRIVATE
    DTORCH_PROJECT_VERSION="${PROJECT_VERSION}")
endif()

# the Python package (python/): pip install into a venv under the build dir,
# pytest python/tests against this build's libdtorch.so.1
if(DTORCH_BUILD_TESTS AND NOT DTORCH_SANITIZE)
  add_test(NAME python_package COMMAND
    ${CMAKE_CURRENT_SOURCE_DIR}/scripts/python-test.sh
    ${CMAKE_CURRENT_BINARY_DIR}/python-venv ${CMAKE_CURRENT_SOURCE_DIR}
    $<TARGET_FILE:dtorch>)
  set_tests_properties(python_package PROPERTIES LABELS "python;install"
    SKIP_RETURN_CODE 77 TIMEOUT 2400)
  # the Python examples: each trains on dtorch and compares with real torch
  foreach(example tp_mlp dp_tp_transformer api_guide)
    add_test(NAME python_example_${example} COMMAND
      ${CMAKE_CURRENT_SOURCE_DIR}/scripts/python-example.sh
      ${CMAKE_CURRENT_BINARY_DIR}/python-venv ${CMAKE_CURRENT_SOURCE_DIR}
      $<TARGET_FILE:dtorch> ${example}.py)
    # after python_package, which makes the venv with torch: under ctest -j
    # an example started beside it found no torch and skipped
    set_tests_properties(python_example_${example} PROPERTIES
      LABELS "python;example" SKIP_RETURN_CODE 77 TIMEOUT 120
      DEPENDS python_package)
  endforeach()
endif()
