#include "io/progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "nn/check.h"

#if defined(_WIN32)
#include <io.h>
#define NN_ISATTY _isatty
#define NN_FILENO _fileno
#else
#include <unistd.h>
#define NN_ISATTY isatty
#define NN_FILENO fileno
#endif

namespace nn {

namespace {
// A progress bar redraws in place only on an interactive terminal; a log file or a
// notebook would otherwise fill with carriage returns.
bool stream_is_terminal(const std::ostream& os) {
  if (&os == &std::cout) return NN_ISATTY(NN_FILENO(stdout)) != 0;
  if (&os == &std::cerr) return NN_ISATTY(NN_FILENO(stderr)) != 0;
  return false;
}
}  // namespace

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  auto total = static_cast<long long>(std::llround(seconds));
  const long long h = total / 3600;
  const long long m = (total / 60) % 60;
  const long long s = total % 60;
  std::ostringstream os;
  if (h > 0) os << h << ":" << std::setw(2) << std::setfill('0') << m;
  else os << m;
  os << ":" << std::setw(2) << std::setfill('0') << s;
  return os.str();
}

std::string format_si(double value) {
  const char* suffix = "";
  if (std::fabs(value) >= 1e9) { value /= 1e9; suffix = "G"; }
  else if (std::fabs(value) >= 1e6) { value /= 1e6; suffix = "M"; }
  else if (std::fabs(value) >= 1e3) { value /= 1e3; suffix = "k"; }
  std::ostringstream os;
  os << std::fixed << std::setprecision(std::fabs(value) < 10 ? 2 : 1) << value << suffix;
  return os.str();
}

std::string format_percent(double fraction) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(2) << 100.0 * fraction << "%";
  return os.str();
}

std::string format_fixed(double value, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << value;
  return os.str();
}

// ---- ProgressBar ---------------------------------------------------------------------
ProgressBar::ProgressBar(std::string label, int64_t total, std::ostream& os, double min_interval_s)
    : label_(std::move(label)), total_(total > 0 ? total : 1), os_(os), min_interval_s_(min_interval_s),
      tty_(stream_is_terminal(os)), start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

double ProgressBar::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void ProgressBar::update(int64_t done, const std::vector<std::pair<std::string, std::string>>& fields) {
  const auto now = std::chrono::steady_clock::now();
  // Redraw at most ~10 times a second on a terminal, every min_interval_s elsewhere.
  const double interval = tty_ ? 0.1 : min_interval_s_;
  if (drawn_ && std::chrono::duration<double>(now - last_draw_).count() < interval) return;
  last_draw_ = now;
  draw(done, fields, false);
}

void ProgressBar::finish(const std::vector<std::pair<std::string, std::string>>& fields) {
  draw(total_, fields, true);
}

void ProgressBar::draw(int64_t done, const std::vector<std::pair<std::string, std::string>>& fields,
                       bool final) {
  drawn_ = true;
  const double frac = static_cast<double>(done) / static_cast<double>(total_);
  const double elapsed = elapsed_s();
  // ETA: time per unit so far times the units left.
  const double eta = done > 0 ? elapsed * static_cast<double>(total_ - done) / static_cast<double>(done) : -1;
  constexpr int kWidth = 20;
  const int filled = static_cast<int>(frac * kWidth);
  std::ostringstream line;
  line << label_ << " [" << std::string(static_cast<size_t>(filled), '#')
       << std::string(static_cast<size_t>(kWidth - filled), '.') << "] " << std::setw(3)
       << static_cast<int>(frac * 100.0 + 0.5) << "%";
  for (const auto& [key, value] : fields) line << "  " << key << " " << value;
  if (final) line << "  took " << format_duration(elapsed);
  else line << "  ETA " << format_duration(eta);
  if (tty_) {
    os_ << "\r" << line.str() << "\033[K";  // \033[K clears what a longer previous line left
    if (final) os_ << "\n";
  } else {
    os_ << line.str() << "\n";
  }
  os_.flush();
}

// ---- MetricsLog ------------------------------------------------------------------------
namespace {
std::string json_escape(const std::string& s) {
  std::ostringstream os;
  for (char c : s) {
    switch (c) {
      case '"': os << "\\\""; break;
      case '\\': os << "\\\\"; break;
      case '\n': os << "\\n"; break;
      case '\t': os << "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          os << "\\u" << std::hex << std::setw(4) << std::setfill('0') << static_cast<int>(c);
        } else {
          os << c;
        }
    }
  }
  return os.str();
}
}  // namespace

namespace {
// Appending after a line that a killed process left unfinished would glue two records
// into one unparseable line: cut the file back to its last newline first. Returns the
// bytes cut. Only regular files (not /dev/stdout, /dev/full, pipes) are touched.
int64_t cut_unfinished_line(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return 0;
  const auto size = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  if (ec || size == 0) return 0;
  std::ifstream in(path, std::ios::binary);
  NN_CHECK(in.is_open(), "cannot read the metrics log " << path << " to append to it: check its permissions");
  // Scan backwards in blocks for the last '\n'.
  constexpr int64_t kBlock = 4096;
  int64_t keep = 0;  // bytes up to and including the last newline
  std::string block;
  for (int64_t end = size; end > 0 && keep == 0;) {
    const int64_t begin = std::max<int64_t>(0, end - kBlock);
    block.resize(static_cast<size_t>(end - begin));
    in.seekg(begin);
    in.read(block.data(), static_cast<std::streamsize>(block.size()));
    NN_CHECK(in.gcount() == static_cast<std::streamsize>(block.size()),
             "cannot read the metrics log " << path << " to append to it: was it changed while reading?");
    const auto nl = block.rfind('\n');
    if (nl != std::string::npos) keep = begin + static_cast<int64_t>(nl) + 1;
    end = begin;
  }
  if (keep == size) return 0;
  in.close();
  std::filesystem::resize_file(path, static_cast<uintmax_t>(keep), ec);
  NN_CHECK(!ec, "cannot cut the unfinished last line of the metrics log " << path << ": " << ec.message());
  return size - keep;
}
}  // namespace

MetricsLog::MetricsLog(const std::string& path, Mode mode) : path_(path) {
  if (mode == Mode::Append) cut_bytes_ = cut_unfinished_line(path);
  out_.open(path, std::ios::out | (mode == Mode::Append ? std::ios::app : std::ios::trunc));
  NN_CHECK(out_.is_open(), "cannot write the metrics log " << path
                               << ": check that its directory exists and is writable");
}

MetricsLog::Record& MetricsLog::Record::add(const std::string& key, double value) {
  std::ostringstream os;
  os << (body_.empty() ? "" : ", ") << "\"" << json_escape(key) << "\": ";
  if (std::isfinite(value)) {
    os << std::setprecision(9) << value;
  } else {
    os << "null";  // JSON has no NaN/Infinity; null keeps the line parseable
  }
  body_ += os.str();
  return *this;
}

MetricsLog::Record& MetricsLog::Record::add(const std::string& key, int64_t value) {
  std::ostringstream os;
  os << (body_.empty() ? "" : ", ") << "\"" << json_escape(key) << "\": " << value;
  body_ += os.str();
  return *this;
}

MetricsLog::Record& MetricsLog::Record::add(const std::string& key, const std::string& value) {
  std::ostringstream os;
  os << (body_.empty() ? "" : ", ") << "\"" << json_escape(key) << "\": \"" << json_escape(value) << "\"";
  body_ += os.str();
  return *this;
}

void MetricsLog::write(const Record& record) {
  if (!out_.is_open()) return;
  out_ << record.json() << "\n";
  out_.flush();  // a crashed run still leaves every line written so far
  NN_CHECK(out_.good(), "cannot write to the metrics log " << path_
                            << " (is the disk full?): the log is incomplete from here; free some space or "
                               "choose another --log");
}

}  // namespace nn
