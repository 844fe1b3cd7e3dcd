// tests/main.cpp: Catch2's main, compiled once (the other test files only include catch.hpp).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
