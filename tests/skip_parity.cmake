# Stands in for the PyTorch parity tests when cmake found no Python that imports torch.
if("$ENV{CI}" STREQUAL "true")
  message(FATAL_ERROR "CI=true but no Python with PyTorch: the GPT parity tests cannot run. "
                      "scripts/setup.sh installs python3-torch; then re-run cmake.")
endif()
message("SKIP GPT parity with PyTorch: no Python that imports torch was found when cmake ran "
        "(install python3-torch, or set -DNNLAB_TORCH_PYTHON=/path/to/python, and re-configure)")
