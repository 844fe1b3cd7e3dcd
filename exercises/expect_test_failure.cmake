# exercises/expect_test_failure.cmake: passes when an exercise's stub FAILS its tests.
#
#   cmake -DEXE=<path to ex_NAME> -DNAME=<NAME> -P expect_test_failure.cmake
#
# A shipped stub must fail (the student has work to do), and fail for the right reason:
# its assertions fail. Catch2 then exits with the number of failed assertions (1..255)
# and prints "FAILED". A crash is a different thing: execute_process reports a signal as
# text ("Segmentation fault"), Windows as a huge exit code, and Catch2's own signal
# handler prints "fatal error condition". Neither counts as "the stub fails its tests".
if(NOT DEFINED EXE)
  message(FATAL_ERROR
          "usage: cmake -DEXE=<test program> [-DNAME=<exercise>] -P expect_test_failure.cmake")
endif()
if(NOT DEFINED NAME)
  set(NAME "${EXE}")
endif()

execute_process(COMMAND "${EXE}"
                RESULT_VARIABLE rc
                OUTPUT_VARIABLE out
                ERROR_VARIABLE err
                TIMEOUT 50)
set(output "${out}${err}")

if(rc MATCHES "^[0-9]+$" AND rc EQUAL 0)
  message(FATAL_ERROR "the stub of exercise ${NAME} PASSES its tests: either the tests are too "
                      "weak or the stub holds a solution. A shipped stub must fail.\n${output}")
endif()
if(NOT rc MATCHES "^[0-9]+$" OR rc GREATER 255)
  message(FATAL_ERROR "the stub of exercise ${NAME} did not fail its tests, it crashed or hung "
                      "(exit: ${rc}). A stub's placeholder must be harmless.\n${output}")
endif()
if(output MATCHES "fatal error condition")
  message(FATAL_ERROR "the stub of exercise ${NAME} crashed inside its tests (exit ${rc}). "
                      "A stub's placeholder must be harmless.\n${output}")
endif()
if(NOT output MATCHES "FAILED")
  message(FATAL_ERROR "the stub of exercise ${NAME} exited with ${rc} but printed no failed "
                      "assertion (no \"FAILED\"): that is not a Catch2 test failure.\n${output}")
endif()

# Summarise like Catch2 does: "test cases: 5 | 4 failed".
string(REGEX MATCH "test cases:[^\n]*" cases "${output}")
message(STATUS "stub of ${NAME} fails its tests, as it should (exit ${rc}; ${cases})")
