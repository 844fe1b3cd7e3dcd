# cmake/NnlabCompilerCanary.cmake: does this compiler, with exactly this build's flags,
# compile correct code? Checked at configure time, before anything is built.
#
# Why: Debian 12's GCC 12.2 silently changes constants at -O2 and above when AVX-512 is
# enabled (-march=native on Intel Skylake-SP and later server parts, Ice/Tiger Lake, AMD
# Zen 4/5): `const std::vector<double> v = {1, 1, 0, 0};` holds {1, 1, 1, 1}. Its
# straight-line (SLP) vectoriser turns the copy of the constant into a vector store, and the
# AVX-512 code it emits broadcasts the first value over the trailing zeros. Lesson 07's token
# C was hit; the next constant may be anywhere, so the build protects itself rather than
# rewriting the one line that happened to be hit.
#
# How: the canaries in cmake/canary/ (small programs with the known bad pattern, in double,
# float and integers, plus other roads by which constants reach memory) are compiled with the
# build's own compiler and flags (CMAKE_CXX_FLAGS, the build type's flags, the C++ standard,
# the CPU flags, OpenMP, sanitizers) and run. If one prints a wrong value, the workarounds
# below are tried in order, each checked by running every canary again:
#   1. -fno-tree-slp-vectorize   switch off the straight-line vectoriser where the defect
#                                sits; the loop vectoriser and the hand-written intrinsics
#                                (kernels/simd.h) keep AVX-512
#   2. -mno-avx512f              give up AVX-512: the kernels use their AVX2 path
# The first that makes every canary pass is added to every target (nnlab_options). If none
# does, configuration stops and says what to do. When the flags target instructions this CPU
# lacks (the canaries die of SIGILL), nothing can be checked here: the first workaround is
# applied as a precaution, with a warning. The configure output says what was found
# and done; `nnlab info` says it again.
#
# Results:
#   NNLAB_COMPILER_WORKAROUND   the flags added ("" when none was needed)
#   NNLAB_CANARY_SUMMARY        one line for `nnlab info`

# The flags a C++ file of ours is compiled with, as a list: what CMake puts on the command
# line for a target linking nnlab_options (warnings aside, which do not change code).
function(nnlab_build_cxx_flags out cpu_flags sanitize_flags)
  set(flags "")
  separate_arguments(general UNIX_COMMAND "${CMAKE_CXX_FLAGS}")
  list(APPEND flags ${general})
  if(CMAKE_BUILD_TYPE)
    string(TOUPPER "${CMAKE_BUILD_TYPE}" config)
    separate_arguments(per_config UNIX_COMMAND "${CMAKE_CXX_FLAGS_${config}}")
    list(APPEND flags ${per_config})
  endif()
  if(CMAKE_CXX20_STANDARD_COMPILE_OPTION)
    list(APPEND flags ${CMAKE_CXX20_STANDARD_COMPILE_OPTION})
  endif()
  separate_arguments(omp UNIX_COMMAND "${OpenMP_CXX_FLAGS}")
  list(APPEND flags ${omp} ${cpu_flags} ${sanitize_flags})
  set(${out} "${flags}" PARENT_SCOPE)
endfunction()

# Builds and runs every canary with `flags`. Sets ${ok} to TRUE when all print correct
# values, and ${report} to what the failing ones printed (or why one did not build).
function(nnlab_run_canaries ok report flags link_flags)
  set(dir "${CMAKE_BINARY_DIR}/CMakeFiles/nnlab_canary")
  file(MAKE_DIRECTORY "${dir}")
  file(GLOB sources "${PROJECT_SOURCE_DIR}/cmake/canary/*.cpp")
  set(all_ok TRUE)
  set(cannot_run FALSE)
  set(text "")
  foreach(src IN LISTS sources)
    get_filename_component(name "${src}" NAME_WE)
    execute_process(
      COMMAND ${CMAKE_CXX_COMPILER} ${flags} -I${PROJECT_SOURCE_DIR}/cmake/canary ${src}
              -o ${dir}/${name} ${link_flags}
      RESULT_VARIABLE built OUTPUT_VARIABLE out ERROR_VARIABLE out)
    if(NOT built EQUAL 0)
      set(all_ok FALSE)
      string(APPEND text "  ${name}: did not build:\n${out}\n")
      continue()
    endif()
    execute_process(COMMAND ${dir}/${name} RESULT_VARIABLE ran OUTPUT_VARIABLE out ERROR_VARIABLE out
                    TIMEOUT 30)
    if(ran MATCHES "Illegal instruction")
      # Built for instructions this CPU does not have (e.g. -march=x86-64-v4 on an AVX2 CPU):
      # the program cannot say anything about the compiler here.
      set(cannot_run TRUE)
    endif()
    if(NOT ran EQUAL 0)
      set(all_ok FALSE)
      string(REGEX REPLACE "\n$" "" out "${out}")
      string(REPLACE "\n" "\n    " out "${out}")
      string(APPEND text "  ${name} (exit ${ran}):\n    ${out}\n")
    endif()
  endforeach()
  set(${ok} ${all_ok} PARENT_SCOPE)
  set(${report} "${text}" PARENT_SCOPE)
  set(NNLAB_CANARY_CANNOT_RUN ${cannot_run} PARENT_SCOPE)
endfunction()

function(nnlab_compiler_canary cpu_flags sanitize_flags)
  set(NNLAB_COMPILER_WORKAROUND "" PARENT_SCOPE)
  set(compiler "${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}")
  if(MSVC OR CMAKE_CROSSCOMPILING)
    set(NNLAB_CANARY_SUMMARY "not run (${compiler}: the canaries need a GCC-style compiler whose programs run here)"
        PARENT_SCOPE)
    message(STATUS "nnlab: compiler canary not run (MSVC or cross-compiling): ${compiler}")
    return()
  endif()

  nnlab_build_cxx_flags(flags "${cpu_flags}" "${sanitize_flags}")
  set(link_flags ${sanitize_flags} ${OpenMP_CXX_FLAGS})
  list(JOIN flags " " shown)
  file(GLOB sources "${PROJECT_SOURCE_DIR}/cmake/canary/*.cpp")
  list(LENGTH sources n)

  # The answer depends only on the compiler and the flags: reuse it on re-configure.
  string(MD5 key "${CMAKE_CXX_COMPILER};${compiler};${flags};${link_flags}")
  foreach(src IN LISTS sources ITEMS "${PROJECT_SOURCE_DIR}/cmake/canary/common.h" "${CMAKE_CURRENT_FUNCTION_LIST_FILE}")
    file(MD5 "${src}" h)
    string(MD5 key "${key};${h}")
  endforeach()
  if(DEFINED CACHE{NNLAB_CANARY_KEY} AND NNLAB_CANARY_KEY STREQUAL key)
    message(STATUS "nnlab: compiler canary (cached for these flags): ${NNLAB_CANARY_CACHED_SUMMARY}")
    set(NNLAB_COMPILER_WORKAROUND "${NNLAB_CANARY_CACHED_WORKAROUND}" PARENT_SCOPE)
    set(NNLAB_CANARY_SUMMARY "${NNLAB_CANARY_CACHED_SUMMARY}" PARENT_SCOPE)
    return()
  endif()

  message(STATUS "nnlab: compiler canary: ${n} programs, ${compiler}, flags: ${shown}")
  nnlab_run_canaries(ok report "${flags}" "${link_flags}")
  set(workaround "")
  if(NNLAB_CANARY_CANNOT_RUN)
    # The flags target a CPU this one is not (a build for another machine, or the compile-only
    # AVX-512 level of scripts/test_simd_paths.sh on an AVX2 CPU): the canaries cannot run, so
    # nothing is known. The first workaround costs nothing measurable (docs/platforms.md): it is
    # applied as a precaution, and said.
    set(workaround "-fno-tree-slp-vectorize")
    include(CheckCXXCompilerFlag)
    check_cxx_compiler_flag("${workaround}" NNLAB_HAS_FLAG_fno_tree_slp_vectorize)
    if(NOT NNLAB_HAS_FLAG_fno_tree_slp_vectorize)
      set(workaround "")
    endif()
    set(summary "NOT RUN: this CPU cannot execute code built with ${shown} (it lacks an instruction set they enable), precaution applied: ${workaround}")
    message(WARNING "nnlab: compiler canary ${summary}. Run the build's tests on a CPU that has "
                    "the instructions these flags enable before trusting it.")
  elseif(ok)
    set(summary "passed (${n} programs, ${compiler}, ${shown}): no workaround needed")
    message(STATUS "nnlab: compiler canary ${summary}")
  else()
    message(WARNING "nnlab: this compiler MISCOMPILES with the build's flags (${compiler}, ${shown}). "
                    "The canaries printed:\n${report}"
                    "Trying the workarounds in cmake/NnlabCompilerCanary.cmake ...")
    set(found FALSE)
    foreach(candidate IN ITEMS "-fno-tree-slp-vectorize" "-mno-avx512f")
      include(CheckCXXCompilerFlag)
      string(MAKE_C_IDENTIFIER "NNLAB_HAS_FLAG${candidate}" var)
      check_cxx_compiler_flag("${candidate}" ${var})
      if(NOT ${var})
        message(STATUS "nnlab: compiler canary: ${candidate} is not accepted by this compiler")
        continue()
      endif()
      nnlab_run_canaries(ok report "${flags};${candidate}" "${link_flags}")
      if(ok)
        set(workaround "${candidate}")
        set(found TRUE)
        break()
      endif()
      message(STATUS "nnlab: compiler canary: with ${candidate} the canaries still fail:\n${report}")
    endforeach()
    if(NOT found)
      message(FATAL_ERROR
        "nnlab: ${compiler} miscompiles the canaries in cmake/canary/ with the flags ${shown}, "
        "and no known workaround fixes it. Nothing was built. Try, in this order: "
        "configure with -DNNLAB_NATIVE=OFF (portable code, no -march=native); "
        "another compiler (-DCMAKE_CXX_COMPILER=clang++, or a newer GCC); "
        "then report the canary output above.")
    endif()
    set(summary "FAILED with ${compiler} at ${shown}: workaround ${workaround} applied, and all ${n} programs then passed")
    message(STATUS "nnlab: compiler canary: workaround found: ${workaround} (added to every target); "
                   "all ${n} canaries pass with it")
  endif()
  set(NNLAB_CANARY_KEY "${key}" CACHE INTERNAL "")
  set(NNLAB_CANARY_CACHED_WORKAROUND "${workaround}" CACHE INTERNAL "")
  set(NNLAB_CANARY_CACHED_SUMMARY "${summary}" CACHE INTERNAL "")
  set(NNLAB_COMPILER_WORKAROUND "${workaround}" PARENT_SCOPE)
  set(NNLAB_CANARY_SUMMARY "${summary}" PARENT_SCOPE)
endfunction()
