// gpt/profile.h: where a training step's time goes, op by op, on any backend.
//
//   Profile prof;
//   Backend timed = profiled(*be, prof);  // a copy of the table: the same ops, each timed
//   gpt_forward(model, timed, ...); ...    // the model code runs through it unchanged
//   print_profile(std::cout, prof.rows(), steps);
//
// profiled() wraps every op of the table generically (gpt/backend.h: for_each_op), so an op
// added to Backend is profiled with no line here. Each op waits for everything before it
// (Backend::synchronize), runs, and waits for itself: on a GPU that removes the overlap of
// the host's launches with the device's work, so the sum is a little more than an
// unprofiled step (the table says so). Host backends are synchronous anyway.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include "gpt/backend.h"

namespace gpt {

struct ProfileRow {
  std::string op;     // "matmul_backward"
  int64_t calls = 0;  // over the profiled steps
  double ms = 0.0;    // total
};

// The totals the timed ops add to.
class Profile {
 public:
  // Rows in the order the ops first ran; reset() clears them.
  std::vector<ProfileRow> rows() const { return rows_; }
  void reset();
  void add(const std::string& op, double ms);

 private:
  std::vector<ProfileRow> rows_;
  std::map<std::string, size_t> index_;
};

// A copy of the table `inner` whose every op is inner's op timed into `profile` (which must
// outlive the copy); named "<inner's name> (profiled)", everything else inner's.
Backend profiled(const Backend& inner, Profile& profile);

// A table: op, calls per step, ms per step, % of the profiled total; rows sorted by time.
// `steps` divides the totals.
void print_profile(std::ostream& os, std::vector<ProfileRow> rows, int steps);

}  // namespace gpt
