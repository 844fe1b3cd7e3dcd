# Stands in for a notebook test when no Python with the notebook tools was found.
if("$ENV{CI}" STREQUAL "true")
  message(FATAL_ERROR "CI=true but no Python with nbclient/numpy/matplotlib: cannot run ${NOTEBOOK}. "
                      "scripts/setup.sh installs them.")
endif()
message("SKIP ${NOTEBOOK}: no Python with nbclient, ipykernel, numpy and matplotlib "
        "(run scripts/setup.sh or python3 -m pip install -r notebooks/requirements.txt)")
