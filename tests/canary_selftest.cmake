# tests/canary_selftest.cmake (ctest "canary: ..."): the compiler canary can fail, and the
# build's own flags pass it.
#   1. With NNLAB_CANARY_SELF_TEST every canary plays a miscompiled program (its last value
#      comes out wrong): nnlab_run_canaries must report every program as failing.
#   2. With exactly the build's flags plus the workaround configure chose, every canary
#      must pass: what configure concluded still holds for the compiler in use.
# Run as: cmake -DCXX=... -DSRC=... -DWORK=... -DFLAGS=... -DLINK=... -P canary_selftest.cmake
set(CMAKE_CXX_COMPILER "${CXX}")
set(PROJECT_SOURCE_DIR "${SRC}")
set(CMAKE_BINARY_DIR "${WORK}")
include(${SRC}/cmake/NnlabCompilerCanary.cmake)
file(GLOB sources "${SRC}/cmake/canary/*.cpp")
list(LENGTH sources n)

nnlab_run_canaries(ok report "${FLAGS};-DNNLAB_CANARY_SELF_TEST" "${LINK}")
if(ok)
  message(FATAL_ERROR "canary self-test: a miscompile was played and the canaries did not notice it")
endif()
string(REGEX MATCHALL "\\(exit [0-9]+\\)" failed "${report}")
list(LENGTH failed n_failed)
if(NOT n_failed EQUAL n)
  message(FATAL_ERROR "canary self-test: ${n_failed} of ${n} canaries noticed the played miscompile:\n${report}")
endif()
message(STATUS "canary self-test: all ${n} canaries caught the played miscompile")

nnlab_run_canaries(ok report "${FLAGS}" "${LINK}")
if(NOT ok)
  message(FATAL_ERROR "canary: with the build's flags (${FLAGS}) the canaries fail:\n${report}")
endif()
message(STATUS "canary: all ${n} canaries pass with the build's flags: ${FLAGS}")
