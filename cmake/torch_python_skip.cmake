# Stands in for the PyTorch reference's tests when no Python with PyTorch was found
# (cmake/torch_python.cmake).
if("$ENV{CI}" STREQUAL "true")
  message(FATAL_ERROR "CI=true but no Python that can `import torch, numpy`: cannot check "
                      "scripts/gpt_torch.py. scripts/setup.sh installs python3-torch.")
endif()
message("SKIP gpt_torch reference: no Python with PyTorch (install python3-torch, or "
        "configure with -DNNLAB_TORCH_PYTHON=/path/to/python)")
