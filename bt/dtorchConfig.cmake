# The CMake package of dtorch: find_package(dtorch CONFIG) gives
#   dtorch::dtorch         the shared library (libdtorch.so.0)
#   dtorch::dtorch_static  libdtorch.a with its dependencies (liburing, ck,
#                          openblas, cjson through pkg-config; threads, m);
#                          defined only where those are found
# Relocatable: paths are relative to this file.

####### Expanded from @PACKAGE_INIT@ by configure_package_config_file() #######
####### Any changes to this file will be overwritten by the next CMake run ####
####### The input file was dtorchConfig.cmake.in                            ########

get_filename_component(PACKAGE_PREFIX_DIR "${CMAKE_CURRENT_LIST_DIR}/../../../" ABSOLUTE)

macro(set_and_check _var _file)
  set(${_var} "${_file}")
  if(NOT EXISTS "${_file}")
    message(FATAL_ERROR "File or directory ${_file} referenced by variable ${_var} does not exist !")
  endif()
endmacro()

macro(check_required_components _NAME)
  foreach(comp ${${_NAME}_FIND_COMPONENTS})
    if(NOT ${_NAME}_${comp}_FOUND)
      if(${_NAME}_FIND_REQUIRED_${comp})
        set(${_NAME}_FOUND FALSE)
      endif()
    endif()
  endforeach()
endmacro()

####################################################################################

if(NOT TARGET dtorch::dtorch)
  add_library(dtorch::dtorch SHARED IMPORTED)
  set_target_properties(dtorch::dtorch PROPERTIES
    IMPORTED_LOCATION "${PACKAGE_PREFIX_DIR}/lib/libdtorch.so.0.1.0"
    IMPORTED_SONAME "libdtorch.so.0"
    INTERFACE_INCLUDE_DIRECTORIES "${PACKAGE_PREFIX_DIR}/include")
endif()

if(NOT TARGET dtorch::dtorch_static)
  find_package(Threads QUIET)
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND AND Threads_FOUND)
    pkg_check_modules(DTORCH_STATIC_DEPS QUIET IMPORTED_TARGET
                      liburing ck openblas libcjson)
  endif()
  if(TARGET PkgConfig::DTORCH_STATIC_DEPS)
    add_library(dtorch::dtorch_static STATIC IMPORTED)
    set_target_properties(dtorch::dtorch_static PROPERTIES
      IMPORTED_LOCATION "${PACKAGE_PREFIX_DIR}/lib/libdtorch.a"
      INTERFACE_INCLUDE_DIRECTORIES "${PACKAGE_PREFIX_DIR}/include"
      INTERFACE_LINK_LIBRARIES "PkgConfig::DTORCH_STATIC_DEPS;Threads::Threads;m;/usr/local/cuda/lib/libcudart_static.a;dl;rt;stdc++")
  elseif(NOT dtorch_FIND_QUIETLY)
    message(STATUS "dtorch: no dtorch::dtorch_static (pkg-config, threads, "
                   "liburing, ck, openblas or libcjson not found)")
  endif()
endif()

check_required_components(dtorch)
