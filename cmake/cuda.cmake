# The CUDA backend's build (docs/cuda.md). Included by CMakeLists.txt after
# the C flags are set; defines
#   DTORCH_CUDA_ENABLED      ON when the backend is built
#   DTORCH_CUDA_OBJECTS      the .cu objects to add to the libraries
#   dtorch_cuda_attach(tgt)  adds the host glue (kernels/cuda/*.c), the
#                            include dirs, DTORCH_HAVE_CUDA and cudart
#
# The library must load and every CPU test must pass on a machine with no
# GPU and no driver, so nothing links libcuda.so: cudart is linked
# statically (it opens libcuda.so.1 itself when first called), and cuBLAS
# and NCCL are opened with dlopen when a "cuda" runtime is created
# (kernels/cuda/libs.c). Linking them would also cost every process
# ~150 ms of loading 570 MB of cuBLAS/cuBLASLt that a CPU run never calls.

string(TOLOWER "${DTORCH_CUDA}" _dt_cuda)
if(_dt_cuda MATCHES "^(on|1|true|yes)$")
  set(_dt_cuda on)
elseif(_dt_cuda MATCHES "^(off|0|false|no)$")
  set(_dt_cuda off)
elseif(NOT _dt_cuda STREQUAL "auto")
  message(FATAL_ERROR "DTORCH_CUDA=${DTORCH_CUDA}: expected auto, on or off")
endif()

set(DTORCH_CUDA_ENABLED OFF)
set(DTORCH_CUDA_OBJECTS "")
set(DTORCH_CUDA_WHY "DTORCH_CUDA=off")
if(NOT _dt_cuda STREQUAL "off")
  # the shell's PATH is not enough: CI and fresh machines have CUDA in
  # /usr/local/cuda without it on PATH
  find_program(DTORCH_NVCC nvcc
    HINTS "$ENV{CUDA_HOME}/bin" "$ENV{CUDA_PATH}/bin"
    PATHS /usr/local/cuda/bin)
  if(DTORCH_NVCC)
    set(DTORCH_CUDA_ENABLED ON)
  elseif(_dt_cuda STREQUAL "on")
    message(FATAL_ERROR "DTORCH_CUDA=on but nvcc was found neither in PATH "
            "nor in $CUDA_HOME/bin nor in /usr/local/cuda/bin")
  else()
    set(DTORCH_CUDA_WHY "nvcc not found (DTORCH_CUDA=auto)")
  endif()
endif()

if(DTORCH_CUDA_ENABLED)
  set(CMAKE_CUDA_COMPILER "${DTORCH_NVCC}")
  set(CMAKE_CUDA_ARCHITECTURES "${DTORCH_CUDA_ARCHITECTURES}")
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  find_path(DTORCH_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS}
            /usr/include /usr/local/cuda/include)
  if(NOT DTORCH_NCCL_INCLUDE)
    message(FATAL_ERROR "the CUDA backend needs nccl.h (NCCL 2.x headers)")
  endif()

  file(GLOB DTORCH_CUDA_SOURCES CONFIGURE_DEPENDS kernels/cuda/*.cu)
  add_library(dtorch_cuda_obj OBJECT ${DTORCH_CUDA_SOURCES})
  target_include_directories(dtorch_cuda_obj PRIVATE
    ${CMAKE_CURRENT_SOURCE_DIR}/include ${CMAKE_CURRENT_SOURCE_DIR}
    ${CUDAToolkit_INCLUDE_DIRS})
  target_compile_definitions(dtorch_cuda_obj PRIVATE DTORCH_BUILDING
                             DTORCH_HAVE_CUDA=1)
  # device code: every warning is an error; host code: as strict as the C
  # code. No sanitizers here: ASan/TSan cannot instrument device code, and
  # the host side of a .cu file only launches kernels.
  target_compile_options(dtorch_cuda_obj PRIVATE
    "$<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings;-Xcompiler=-Wall,-Wextra,-Wno-unused-parameter,-fvisibility=hidden,-fno-exceptions>")
  if(DTORCH_WERROR)
    target_compile_options(dtorch_cuda_obj PRIVATE
      "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Werror>")
  endif()
  set(DTORCH_CUDA_OBJECTS $<TARGET_OBJECTS:dtorch_cuda_obj>)
  set(DTORCH_CUDA_WHY "nvcc ${CMAKE_CUDA_COMPILER_VERSION}, ${DTORCH_CUDA_ARCHITECTURES}")
endif()

function(dtorch_cuda_attach tgt)
  if(NOT DTORCH_CUDA_ENABLED)
    return()
  endif()
  file(GLOB _glue CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/kernels/cuda/*.c)
  target_sources(${tgt} PRIVATE ${_glue})
  target_include_directories(${tgt} PUBLIC ${CUDAToolkit_INCLUDE_DIRS}
                             ${DTORCH_NCCL_INCLUDE})
  target_compile_definitions(${tgt} PUBLIC DTORCH_HAVE_CUDA=1)
  # the .cu objects are C++: libstdc++ for the few runtime hooks of the
  # host-side launch code nvcc generates; dl for cuBLAS / NCCL
  target_link_libraries(${tgt} PUBLIC CUDA::cudart_static ${CMAKE_DL_LIBS}
                        stdc++)
endfunction()
