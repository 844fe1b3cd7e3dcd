// scripts/fetch_data.py, offline: an unreachable server and a mirror serving wrong files
// both end in a non-zero exit, a clear message and no files left behind; a mirror with
// the right files (through a patched checksum table) downloads, then skips. Tiny Shakespeare:
// listed, checked, and saved where nn::load_corpus looks.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tests/test_util.h"
#include "io/text.h"
namespace fs = std::filesystem;
using namespace testing;  // TempDir, error_of, read_bytes, write_bytes (tests/test_util.h)
using Catch::Contains;

namespace {


const std::string kScript = std::string(NNLAB_SOURCE_DIR) + "/scripts/fetch_data.py";

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

// Runs `command`, its stdout and stderr into `log`; returns the exit status (0 = success).
int run(const std::string& command, const std::string& log) {
  return std::system((command + " > " + quoted(log) + " 2>&1").c_str());
}

bool have_python(const TempDir& tmp) { return run("python3 --version", tmp.file("python-version.txt")) == 0; }

// file:///tmp/x/ on POSIX, file:///C:/x/ on Windows.
std::string file_url(const fs::path& dir) {
  std::string s = dir.generic_string();
  if (s.empty() || s[0] != '/') s = "/" + s;
  return "file://" + s + "/";
}

std::vector<std::string> files_under(const fs::path& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return found;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_directory()) found.push_back(e.path().string());
  }
  return found;
}

}  // namespace

TEST_CASE("fetch_data.py: an unreachable server fails cleanly, with the apt hint", "[fetch]") {
  TempDir tmp("fetch");
  if (!have_python(tmp)) {
    WARN("python3 not found: skipping the fetch_data.py tests");
    return;
  }
  const fs::path out = tmp.path / "out";
  const std::string log = tmp.file("log.txt");
  // Port 9 ("discard") on localhost: refused at once, no network needed.
  const int rc = run("python3 " + quoted(kScript) + " fashion-mnist --dir " + quoted(out.string()) +
                         " --base-url http://127.0.0.1:9/ --timeout 10",
                     log);
  const std::string text = read_text(log);
  INFO("fetch_data.py printed:\n" << text);
  REQUIRE(rc != 0);
  REQUIRE(files_under(out).empty());
  REQUIRE(!fs::exists(out / "fashion-mnist"));  // no empty directory that looks like a dataset
  REQUIRE_THAT(text, Contains("cannot download") && Contains("127.0.0.1:9") &&
                         Contains("sudo apt-get install dataset-fashion-mnist"));
}

TEST_CASE("fetch_data.py: a checksum mismatch fails and leaves no file", "[fetch]") {
  TempDir tmp("fetch");
  if (!have_python(tmp)) {
    WARN("python3 not found: skipping the fetch_data.py tests");
    return;
  }
  // A "mirror" serving the right names with the wrong bytes.
  const fs::path src = tmp.path / "mirror";
  fs::create_directories(src);
  for (const char* name : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                           "t10k-labels-idx1-ubyte.gz"}) {
    std::ofstream(src / name) << "not the real " << name << "\n";
  }
  const fs::path out = tmp.path / "out";
  for (const std::string dataset : {"mnist", "fashion-mnist"}) {
    const std::string log = tmp.file("log-" + dataset + ".txt");
    const int rc = run("python3 " + quoted(kScript) + " " + dataset + " --dir " + quoted(out.string()) +
                           " --base-url " + quoted(file_url(src)),
                       log);
    const std::string text = read_text(log);
    INFO("fetch_data.py printed:\n" << text);
    REQUIRE(rc != 0);
    REQUIRE(files_under(out).empty());
    REQUIRE_THAT(text, Contains("train-images-idx3-ubyte.gz: checksum mismatch") &&
                           (dataset == "mnist" ? Contains("expected f68b3c2dcbeaaa9fbdd348bbdeb94873")
                                               : Contains("expected 8d4fb7e6c68d591d4c3dfef9ec88bf0d")));
  }
}

TEST_CASE("fetch_data.py: bad arguments exit non-zero, --help lists the datasets", "[fetch]") {
  TempDir tmp("fetch");
  if (!have_python(tmp)) {
    WARN("python3 not found: skipping the fetch_data.py tests");
    return;
  }
  REQUIRE(run("python3 " + quoted(kScript) + " no-such-dataset", tmp.file("bad.txt")) != 0);
  REQUIRE_THAT(read_text(tmp.file("bad.txt")), Contains("invalid choice"));
  REQUIRE(run("python3 " + quoted(kScript) + " --help", tmp.file("help.txt")) == 0);
  REQUIRE_THAT(read_text(tmp.file("help.txt")), Contains("fashion-mnist") && Contains("mnist") && Contains("--base-url"));
}

TEST_CASE("fetch_data.py: right checksums download, rename, then skip, and a bad local copy is replaced",
          "[fetch]") {
  TempDir tmp("fetch");
  if (!have_python(tmp)) {
    WARN("python3 not found: skipping the fetch_data.py tests");
    return;
  }
  // The real table's files cannot be served offline, so a driver adds a dataset "fake"
  // whose MD5s are those of the mirror's files, and runs the script's main() on it.
  const fs::path src = tmp.path / "mirror";
  fs::create_directories(src);
  std::ofstream(src / "a.bin") << "first file\n";
  std::ofstream(src / "b.bin") << std::string(3 << 20, 'x');  // several 1 MiB chunks
  const std::string driver = tmp.file("driver.py");
  std::ofstream(driver) << R"(import hashlib, os, sys
sys.dont_write_bytecode = True  # leave no __pycache__ in scripts/
sys.path.insert(0, os.path.dirname(sys.argv[1]))
import fetch_data
src, out, url = sys.argv[2], sys.argv[3], sys.argv[4]
md5 = lambda n: hashlib.md5(open(os.path.join(src, n), 'rb').read()).hexdigest()
fetch_data.DATASETS['fake'] = {'base_url': 'http://127.0.0.1:9/', 'files': {n: md5(n) for n in ('a.bin', 'b.bin')},
                               'offline_hint': 'none'}
sys.exit(fetch_data.main(['fake', '--dir', out, '--base-url', url]))
)";
  const fs::path out = tmp.path / "out";
  const std::string cmd = "python3 " + quoted(driver) + " " + quoted(kScript) + " " + quoted(src.string()) + " " +
                          quoted(out.string()) + " " + quoted(file_url(src));

  REQUIRE(run(cmd, tmp.file("first.txt")) == 0);
  std::string text = read_text(tmp.file("first.txt"));
  INFO("first run:\n" << text);
  REQUIRE(read_text((out / "fake" / "a.bin").string()) == "first file\n");
  REQUIRE(fs::file_size(out / "fake" / "b.bin") == (3u << 20));
  REQUIRE(files_under(out).size() == 2);  // no .part left

  REQUIRE(run(cmd, tmp.file("second.txt")) == 0);
  text = read_text(tmp.file("second.txt"));
  INFO("second run:\n" << text);
  REQUIRE_THAT(text, Contains("a.bin: already present, checksum ok") && Contains("b.bin: already present"));

  std::ofstream(out / "fake" / "a.bin") << "damaged";
  REQUIRE(run(cmd, tmp.file("third.txt")) == 0);
  text = read_text(tmp.file("third.txt"));
  INFO("third run:\n" << text);
  REQUIRE_THAT(text, Contains("a.bin: present but its MD5 is") && Contains("downloading it again"));
  REQUIRE(read_text((out / "fake" / "a.bin").string()) == "first file\n");
}

TEST_CASE("fetch_data.py tinyshakespeare: listed, a wrong text is rejected, offline names the fallback", "[fetch]") {
  TempDir tmp("fetch");
  if (!have_python(tmp)) {
    WARN("python3 not found: skipping the fetch_data.py tests");
    return;
  }
  REQUIRE(run("python3 " + quoted(kScript) + " --help", tmp.file("help.txt")) == 0);
  REQUIRE_THAT(read_text(tmp.file("help.txt")), Contains("tinyshakespeare"));

  // A mirror serving upstream's file name with other text.
  const fs::path src = tmp.path / "mirror";
  fs::create_directories(src);
  std::ofstream(src / "input.txt") << "First Citizen:\nnot quite the real thing\n";
  const fs::path out = tmp.path / "out";
  int rc = run("python3 " + quoted(kScript) + " tinyshakespeare --dir " + quoted(out.string()) + " --base-url " +
                   quoted(file_url(src)),
               tmp.file("mismatch.txt"));
  std::string text = read_text(tmp.file("mismatch.txt"));
  INFO("fetch_data.py printed:\n" << text);
  REQUIRE(rc != 0);
  REQUIRE(files_under(out).empty());
  REQUIRE_THAT(text, Contains("input.txt: checksum mismatch") && Contains("expected 6fb458f1232090904fb40fe944165e91"));

  rc = run("python3 " + quoted(kScript) + " tinyshakespeare --dir " + quoted(out.string()) +
               " --base-url http://127.0.0.1:9/ --timeout 10",
           tmp.file("offline.txt"));
  text = read_text(tmp.file("offline.txt"));
  INFO("fetch_data.py printed:\n" << text);
  REQUIRE(rc != 0);
  REQUIRE(files_under(out).empty());
  REQUIRE_THAT(text, Contains("cannot download") && Contains("/usr/share/common-licenses") && Contains("1115394 bytes"));
}

TEST_CASE("fetch_data.py tinyshakespeare puts the file where nn::load_corpus looks", "[fetch]") {
  TempDir tmp("fetch");
  if (!have_python(tmp)) {
    WARN("python3 not found: skipping the fetch_data.py tests");
    return;
  }
  // The real entry, with its MD5 patched to that of a small stand-in (the real text cannot
  // be served offline unless this machine has a copy: see the next step).
  const fs::path src = tmp.path / "mirror";
  fs::create_directories(src);
  std::ofstream(src / "input.txt") << "First Citizen:\nBefore we proceed any further, hear me speak.\n";
  const std::string driver = tmp.file("driver.py");
  std::ofstream(driver) << R"(import hashlib, os, sys
sys.dont_write_bytecode = True  # leave no __pycache__ in scripts/
sys.path.insert(0, os.path.dirname(sys.argv[1]))
import fetch_data
src, out, url = sys.argv[2], sys.argv[3], sys.argv[4]
files = fetch_data.DATASETS['tinyshakespeare']['files']
for n in files:
    files[n] = hashlib.md5(open(os.path.join(src, n), 'rb').read()).hexdigest()
sys.exit(fetch_data.main(['tinyshakespeare', '--dir', out, '--base-url', url]))
)";
  const fs::path out = tmp.path / "out";
  REQUIRE(run("python3 " + quoted(driver) + " " + quoted(kScript) + " " + quoted(src.string()) + " " +
                  quoted(out.string()) + " " + quoted(file_url(src)),
              tmp.file("fake.txt")) == 0);
  INFO("fetch_data.py printed:\n" << read_text(tmp.file("fake.txt")));
  REQUIRE(nn::tinyshakespeare_in(out.string()) == (out / "tinyshakespeare" / "input.txt").string());
  REQUIRE(nn::load_corpus(nn::tinyshakespeare_in(out.string())).text.rfind("First Citizen:", 0) == 0);

  // The real checksum, when this machine has the real text somewhere (CI: ../shared/data
  // beside the repository).
  std::vector<std::string> dirs = nn::corpus_search_dirs();
  dirs.push_back((fs::path(NNLAB_SOURCE_DIR).parent_path() / "shared" / "data").string());
  std::string real;
  for (const std::string& d : dirs) {
    const std::string f = nn::tinyshakespeare_in(d);
    std::error_code ec;
    if (!f.empty() && fs::file_size(f, ec) == 1115394u) {
      real = f;
      break;
    }
  }
  if (real.empty()) {
    WARN("no copy of Tiny Shakespeare on this machine: the real checksum is not exercised");
    return;
  }
  const fs::path mirror = tmp.path / "real-mirror";
  fs::create_directories(mirror);
  fs::copy_file(real, mirror / "input.txt");
  const fs::path out2 = tmp.path / "out2";
  REQUIRE(run("python3 " + quoted(kScript) + " tinyshakespeare --dir " + quoted(out2.string()) + " --base-url " +
                  quoted(file_url(mirror)),
              tmp.file("real.txt")) == 0);
  INFO("fetch_data.py printed:\n" << read_text(tmp.file("real.txt")));
  REQUIRE_THAT(read_text(tmp.file("real.txt")), Contains("input.txt: 1.1 MB, checksum ok"));
  REQUIRE(nn::tinyshakespeare_in(out2.string()) == (out2 / "tinyshakespeare" / "input.txt").string());
}
