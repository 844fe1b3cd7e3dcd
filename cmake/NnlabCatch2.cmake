# nnlab_link_catch2(target): link a test executable against Catch2, v2 or v3.
#   v2 (Debian): the single header; main() comes from a TU defining CATCH_CONFIG_MAIN
#                (tests/main.cpp, exercises/test_main.cpp).
#   v3:          Catch2::Catch2WithMain provides main(); a compatibility header maps
#                <catch2/catch.hpp> onto v3 (cmake/catch2-v3-compat).
function(nnlab_link_catch2 target)
  if(Catch2_VERSION VERSION_GREATER_EQUAL 3)
    target_include_directories(${target} BEFORE PRIVATE ${PROJECT_SOURCE_DIR}/cmake/catch2-v3-compat)
    target_link_libraries(${target} PRIVATE Catch2::Catch2WithMain)
    target_compile_definitions(${target} PRIVATE NNLAB_CATCH2_V3=1)
  else()
    target_link_libraries(${target} PRIVATE Catch2::Catch2)
  endif()
endfunction()
