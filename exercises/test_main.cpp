// exercises/test_main.cpp: Catch2 v2's main(), compiled once and linked into every
// exercise's test program (ex_<name> and ex_<name>_solution).
// Catch2 returns the number of failed assertions as the exit status: 0 means every test
// passed, which is what `nnlab check` and ctest look at.
// With Catch2 v3, main() comes from Catch2::Catch2WithMain instead and this file is empty.
#ifndef NNLAB_CATCH2_V3
#define CATCH_CONFIG_MAIN
#define CATCH_CONFIG_CONSOLE_WIDTH 90  // fewer wrapped lines in the failure messages
#endif
#include <catch2/catch.hpp>
