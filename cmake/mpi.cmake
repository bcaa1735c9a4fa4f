# Multi-process jobs over MPI (launcher "mpi", docs/mpi.md).
# Included by CMakeLists.txt after the C flags are set, like cmake/cuda.cmake;
# defines
#   DTORCH_MPI_ENABLED     ON when libdtorch is built with MPI
#   dtorch_mpi_attach(tgt) links MPI::MPI_C and defines DTORCH_HAVE_MPI=1
#   dtorch_mpi_test(NAME n NP np COMMAND exe args...)
#                          an MPI test (label mpi): the launcher runs exe on
#                          np processes; without MPI a test of the same name
#                          that skips (77)
# Without MPI the library builds and every other test runs: sim/mpi_env.c
# then refuses launcher "mpi" with DT_ERR_UNSUPPORTED. dtorch.h never
# includes mpi.h, so consumers need no MPI headers.

set(DTORCH_MPI auto CACHE STRING "MPI (multi-process jobs): auto, on or off")
set_property(CACHE DTORCH_MPI PROPERTY STRINGS auto on off)
string(TOLOWER "${DTORCH_MPI}" _dt_mpi)
if(_dt_mpi MATCHES "^(on|1|true|yes)$")
  set(_dt_mpi on)
elseif(_dt_mpi MATCHES "^(off|0|false|no)$")
  set(_dt_mpi off)
elseif(NOT _dt_mpi STREQUAL "auto")
  message(FATAL_ERROR "DTORCH_MPI=${DTORCH_MPI}: expected auto, on or off")
endif()

set(DTORCH_MPI_ENABLED OFF)
set(DTORCH_MPI_WHY "DTORCH_MPI=off")
if(NOT _dt_mpi STREQUAL "off")
  if(_dt_mpi STREQUAL "on")
    find_package(MPI COMPONENTS C)
  else()
    find_package(MPI QUIET COMPONENTS C)
  endif()
  if(MPI_C_FOUND)
    set(DTORCH_MPI_ENABLED ON)
    set(DTORCH_MPI_WHY "MPI ${MPI_C_VERSION}, ${MPIEXEC_EXECUTABLE}")
  elseif(_dt_mpi STREQUAL "on")
    message(FATAL_ERROR "DTORCH_MPI=on but CMake's FindMPI found no MPI for C "
            "(install libopenmpi-dev openmpi-bin; scripts/bootstrap.sh does)")
  else()
    set(DTORCH_MPI_WHY "no MPI found (DTORCH_MPI=auto)")
  endif()
endif()

# what MPI_THREAD_MULTIPLE costs (plain MPI; docs/mpi.md)
if(DTORCH_MPI_ENABLED)
  add_executable(mpi_pingpong ${CMAKE_CURRENT_SOURCE_DIR}/bench/mpi/pingpong.c)
  target_link_libraries(mpi_pingpong PRIVATE MPI::MPI_C)
endif()

function(dtorch_mpi_attach tgt)
  if(DTORCH_MPI_ENABLED)
    target_link_libraries(${tgt} PUBLIC MPI::MPI_C)
    target_compile_definitions(${tgt} PUBLIC DTORCH_HAVE_MPI=1)
  endif()
endfunction()

# scripts/mpirun.sh adds what a container and root need; the processes are
# oversubscribed and unbound: CI machines have fewer cores than the tests
# have processes, and the rank threads of each process need cores of their own
set(DTORCH_MPIRUN_SH ${CMAKE_CURRENT_LIST_DIR}/../scripts/mpirun.sh)
function(dtorch_mpi_test)
  cmake_parse_arguments(T "" "NAME;NP;TIMEOUT" "COMMAND" ${ARGN})
  if(NOT T_NAME OR NOT T_NP OR NOT T_COMMAND)
    message(FATAL_ERROR "dtorch_mpi_test: NAME, NP and COMMAND are required")
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  if(DTORCH_MPI_ENABLED)
    add_test(NAME ${T_NAME} COMMAND ${DTORCH_MPIRUN_SH}
             ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${T_NP} ${T_COMMAND})
  else()
    add_test(NAME ${T_NAME} COMMAND sh -c
             "echo 'skipped: dtorch was built without MPI'; exit 77")
  endif()
  # PROCESSORS: ctest -j leaves cores to the np processes
  set_tests_properties(${T_NAME} PROPERTIES LABELS mpi TIMEOUT ${T_TIMEOUT}
    SKIP_RETURN_CODE 77 PROCESSORS ${T_NP})
endfunction()
