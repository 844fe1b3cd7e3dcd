// tests/main.cpp: Catch2 v2's main, compiled once (the other test files only include
// catch.hpp). With Catch2 v3, main() comes from Catch2::Catch2WithMain instead.
#ifndef NNLAB_CATCH2_V3
#define CATCH_CONFIG_MAIN
#endif
#include <catch2/catch.hpp>
