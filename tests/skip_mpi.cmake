# Stands in for the MPI tests when cmake found no MPI (kernels/CMakeLists.txt: NNLAB_HAVE_MPI).
if("$ENV{CI}" STREQUAL "true")
  message(FATAL_ERROR "CI=true but no MPI: the MPI tests cannot run. "
                      "scripts/setup.sh installs openmpi-bin and libopenmpi-dev; then re-run cmake.")
endif()
message("SKIP MPI: no MPI was found when cmake ran (Debian: sudo apt-get install openmpi-bin "
        "libopenmpi-dev, or bash scripts/setup.sh; then re-configure). The thread engine's tests "
        "(unit: comm: ...) run the same algorithms without it.")
