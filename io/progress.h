// io/progress.h: a progress bar for the terminal and a JSON-lines metrics log.
#pragma once

#include <chrono>
#include <cstdint>
#include <fstream>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

namespace nn {

// One line, redrawn in place on a terminal:
//   epoch 3/15 [#########.......]  62%  loss 0.3121  acc 88.9%  41k img/s  ETA 0:14
// When the stream is not a terminal (a log file, CI, a notebook) it prints a plain line
// at most every `min_interval_s` seconds instead of redrawing.
class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total, std::ostream& os, double min_interval_s = 1.0);
  // `done` of `total` units finished; `fields` are shown after the percentage.
  void update(int64_t done, const std::vector<std::pair<std::string, std::string>>& fields);
  void finish(const std::vector<std::pair<std::string, std::string>>& fields);
  double elapsed_s() const;

 private:
  void draw(int64_t done, const std::vector<std::pair<std::string, std::string>>& fields, bool final);
  std::string label_;
  int64_t total_;
  std::ostream& os_;
  double min_interval_s_;
  bool tty_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
  bool drawn_ = false;
};

// "0:07", "1:02:03"
std::string format_duration(double seconds);
// 41234.5 -> "41.2k"
std::string format_si(double value);
// 0.8956 -> "89.56%"
std::string format_percent(double fraction);
// (0.41234, 4) -> "0.4123"
std::string format_fixed(double value, int digits);

// Appends one JSON object per line: {"epoch": 1, "loss": 0.41, "split": "train"}.
// Notebooks read it with pandas or a few lines of json.
//
// A new log (Truncate) replaces the file; a resumed run's log (Append) continues it, so
// the history before the resume stays. A line cut short by a process that died mid-write
// is removed on Append (it is not JSON; `cut_bytes()` says how many bytes went).
// Every line is flushed, and a failed write (a full disk) is an nn::Error naming the file:
// a run never goes on with a log that silently stopped.
class MetricsLog {
 public:
  enum class Mode { Truncate, Append };
  MetricsLog() = default;  // disabled: write() does nothing
  explicit MetricsLog(const std::string& path, Mode mode = Mode::Truncate);
  bool enabled() const { return out_.is_open(); }
  const std::string& path() const { return path_; }
  int64_t cut_bytes() const { return cut_bytes_; }

  class Record {
   public:
    Record& add(const std::string& key, double value);
    Record& add(const std::string& key, int64_t value);
    Record& add(const std::string& key, int value) { return add(key, static_cast<int64_t>(value)); }
    Record& add(const std::string& key, const std::string& value);
    std::string json() const { return "{" + body_ + "}"; }

   private:
    std::string body_;
  };
  void write(const Record& record);

 private:
  std::ofstream out_;
  std::string path_;
  int64_t cut_bytes_ = 0;
};

}  // namespace nn
