// io/progress.h's MetricsLog: a new log replaces the file, a resumed one appends (the
// history before the resume stays), a line cut short by a killed run is removed before
// appending, and a write that fails (a full disk: /dev/full) is an nn::Error naming the file.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "io/progress.h"
#include "tests/test_util.h"

using Catch::Contains;

TEST_CASE("MetricsLog: Truncate starts over, Append keeps the history", "[nn][progress]") {
  testing::TempDir dir("metrics-log");
  const std::string path = dir.file("log.jsonl");
  {
    nn::MetricsLog log(path);
    log.write(nn::MetricsLog::Record().add("step", 1));
    log.write(nn::MetricsLog::Record().add("step", 2));
  }
  {
    nn::MetricsLog log(path, nn::MetricsLog::Mode::Append);
    CHECK(log.cut_bytes() == 0);
    log.write(nn::MetricsLog::Record().add("step", 3));
  }
  CHECK(testing::read_text(path) == "{\"step\": 1}\n{\"step\": 2}\n{\"step\": 3}\n");
  {
    nn::MetricsLog log(path);  // Truncate
    log.write(nn::MetricsLog::Record().add("step", 9));
  }
  CHECK(testing::read_text(path) == "{\"step\": 9}\n");
  // Append to a file that does not exist yet creates it
  const std::string fresh = dir.file("new.jsonl");
  nn::MetricsLog(fresh, nn::MetricsLog::Mode::Append).write(nn::MetricsLog::Record().add("step", 1));
  CHECK(testing::read_text(fresh) == "{\"step\": 1}\n");
}

TEST_CASE("MetricsLog: Append removes a line a killed run left unfinished", "[nn][progress]") {
  testing::TempDir dir("metrics-log-cut");
  const std::string path = dir.file("log.jsonl");
  std::string long_line(10000, 'x');  // longer than the 4 KiB block the scan reads
  std::ofstream(path) << "{\"step\": 1}\n{\"a\": \"" << long_line << "\"}\n{\"step\": 2, \"lo";
  {
    nn::MetricsLog log(path, nn::MetricsLog::Mode::Append);
    CHECK(log.cut_bytes() == 15);  // {"step": 2, "lo
    log.write(nn::MetricsLog::Record().add("step", 2));
  }
  CHECK(testing::read_text(path) == "{\"step\": 1}\n{\"a\": \"" + long_line + "\"}\n{\"step\": 2}\n");
  // a file that is one unfinished line is emptied
  std::ofstream(path, std::ios::trunc) << "{\"ste";
  CHECK(nn::MetricsLog(path, nn::MetricsLog::Mode::Append).cut_bytes() == 5);
  CHECK(testing::read_text(path).empty());
}

TEST_CASE("MetricsLog: a write that fails (/dev/full) is an error naming the file", "[nn][progress]") {
  if (!std::filesystem::exists("/dev/full")) {
    WARN("no /dev/full on this system: not tested");
    return;
  }
  nn::MetricsLog log("/dev/full");
  CHECK_THAT(testing::error_of([&] { log.write(nn::MetricsLog::Record().add("step", 1)); }),
             Contains("cannot write to the metrics log /dev/full") && Contains("disk full"));
  nn::MetricsLog append("/dev/full", nn::MetricsLog::Mode::Append);  // not a regular file: nothing cut
  CHECK(append.cut_bytes() == 0);
  CHECK_THAT(testing::error_of([&] { append.write(nn::MetricsLog::Record().add("step", 1)); }),
             Contains("/dev/full"));
}
