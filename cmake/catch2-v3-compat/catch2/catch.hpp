// Catch2 v3 compatibility: the tests are written against Catch2 v2's single header
// (what Debian ships). With Catch2 v3 (Homebrew, vcpkg) CMake puts this directory first
// on the include path, so `#include <catch2/catch.hpp>` lands here, and main() comes
// from Catch2::Catch2WithMain. Not exercised on Debian, where v2 is used.
#pragma once

#include <catch2/catch_all.hpp>
#include <string>

using Catch::Approx;

namespace Catch {
// v2's Catch::Contains / StartsWith string matchers under their v3 names.
inline Matchers::StringContainsMatcher Contains(const std::string& s,
                                               CaseSensitive cs = CaseSensitive::Yes) {
  return Matchers::ContainsSubstring(s, cs);
}
inline Matchers::StartsWithMatcher StartsWith(const std::string& s,
                                              CaseSensitive cs = CaseSensitive::Yes) {
  return Matchers::StartsWith(s, cs);
}
}  // namespace Catch
