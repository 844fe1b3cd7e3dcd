# cmake/torch_python.cmake: the Python that runs scripts/gpt_torch.py, the PyTorch
# reference the C++ GPT (gpt/model.h) is compared with.
#
#   NNLAB_TORCH_PYTHON  (cache) the first of NNLAB_TORCH_PYTHON as given, Debian's
#                       /usr/bin/python3, python3 on PATH that can `import torch, numpy`;
#                       empty when none can, and the PyTorch parity tests skip.
#
# The script, scripts/gpt_torch.py, is found at run time (gpt::torch_script(), through
# io/repo_paths.h), so a moved tree runs its own copy.
#
# Debian's PyTorch is the python3-torch package, importable by /usr/bin/python3 only: a
# pyenv or venv python3 earlier on PATH usually lacks it, hence that order. The check
# runs at every configure (importing torch takes a second or two), so installing or
# removing python3-torch is noticed without clearing the cache.
set(NNLAB_TORCH_PYTHON "" CACHE FILEPATH "Python interpreter with PyTorch and numpy (runs scripts/gpt_torch.py)")

set(_nnlab_torch_given "${NNLAB_TORCH_PYTHON}")
set(_nnlab_torch_python "")
set(_candidates ${NNLAB_TORCH_PYTHON} /usr/bin/python3)
find_program(_nnlab_torch_path_python3 NAMES python3 python)
list(APPEND _candidates ${_nnlab_torch_path_python3})
foreach(py IN LISTS _candidates)
  if(py AND EXISTS "${py}")
    execute_process(COMMAND "${py}" -c "import torch, numpy"
                    RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET TIMEOUT 120)
    if(_rc EQUAL 0)
      set(_nnlab_torch_python "${py}")
      break()
    endif()
  endif()
endforeach()

if(_nnlab_torch_given AND NOT _nnlab_torch_given STREQUAL _nnlab_torch_python)
  message(WARNING "nnlab: NNLAB_TORCH_PYTHON=${_nnlab_torch_given} cannot `import torch, numpy`; "
                  "using '${_nnlab_torch_python}' instead")
endif()
# FORCE: the cache holds what was found, so tests and scripts read one answer.
set(NNLAB_TORCH_PYTHON "${_nnlab_torch_python}" CACHE FILEPATH
    "Python interpreter with PyTorch and numpy (runs scripts/gpt_torch.py)" FORCE)
if(NNLAB_TORCH_PYTHON)
  message(STATUS "nnlab: PyTorch reference with ${NNLAB_TORCH_PYTHON}")
else()
  message(STATUS "nnlab: no Python with PyTorch found: the PyTorch parity tests will skip "
                 "(install python3-torch)")
endif()

# The reference's own checks (tests/python/test_gpt_torch.py: safetensors, attention and
# the whole forward against numpy loops, gradients against finite differences, AdamW
# against gpt/backend.h's formula), as one ctest test labelled "python". Without PyTorch
# it reports SKIP, except under CI (CI=true), where it fails: CI must run it.
if(NNLAB_BUILD_TESTS)
  if(NNLAB_TORCH_PYTHON)
    add_test(NAME "python: gpt_torch reference"
             COMMAND "${NNLAB_TORCH_PYTHON}" "${PROJECT_SOURCE_DIR}/tests/python/test_gpt_torch.py")
  else()
    add_test(NAME "python: gpt_torch reference"
             COMMAND ${CMAKE_COMMAND} -P "${PROJECT_SOURCE_DIR}/cmake/torch_python_skip.cmake")
    set_tests_properties("python: gpt_torch reference" PROPERTIES SKIP_REGULAR_EXPRESSION "SKIP ")
  endif()
  set_tests_properties("python: gpt_torch reference" PROPERTIES LABELS "python" TIMEOUT 600)
  # Lesson 04's twin (scripts/cnn_torch.py) against lesson04 on the same weights: eval and
  # one forward + backward. Skips by itself without torch or the Fashion-MNIST package.
  if(NNLAB_TORCH_PYTHON)
    add_test(NAME "python: cnn_torch twin matches lesson 04"
             COMMAND "${NNLAB_TORCH_PYTHON}" "${PROJECT_SOURCE_DIR}/tests/python/test_cnn_torch.py"
                     "${CMAKE_RUNTIME_OUTPUT_DIRECTORY}/lesson04")
    set_tests_properties("python: cnn_torch twin matches lesson 04" PROPERTIES LABELS "python" TIMEOUT 600
                         SKIP_REGULAR_EXPRESSION "^SKIP ")
  endif()
endif()
