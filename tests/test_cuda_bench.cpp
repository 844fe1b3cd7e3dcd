// The GPU harness (kernels/cuda/bench/run.h) on the emulator: validation before timing, a
// variant that fails validation reported and never timed, the napkin math, the JSON and
// markdown records (device named, "emulated" loud), the goals read back from a record; and
// `nnlab cuda` / `lesson09` from the command line.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cuda/bench/run.h"
#include "lessons/09-cuda/cuda_lesson.h"
#include "tests/cli_helpers.h"

namespace cb = kernels::cuda::bench;
using Catch::Matchers::Contains;
using testing::run_program;

namespace {

kernels::cuda::Device& emu() { return kernels::cuda::emulator(); }

const cb::Ceilings& emu_ceilings() {
  static const cb::Ceilings c = [] {
    cb::CeilingOptions o;
    o.quick = true;
    return cb::measure_ceilings(emu(), o);
  }();
  return c;
}

// A fake op over the emulator's cos2 kernels that records every call, with four variants:
//   v1 right, v2 wrong (its reference is cos(x), not cos(cos(x))), v3 throwing a device
//   error as a broken kernel would, v4 needing a compute capability no device has.
struct Calls {
  std::vector<std::string> log;  // "validate v1", "run v1", ... in call order
};

class FakeProblem final : public cb::Problem {
 public:
  FakeProblem(kernels::cuda::Device& dev, size_t n, Calls& calls) : dev_(dev), n_(n), out_(dev, n), calls_(calls) {
    std::vector<float> host;
    in_ = cb::random_buffer(dev, n, 7, -3.0f, 3.0f, &host);
    right_.resize(n);
    wrong_.resize(n);
    for (size_t i = 0; i < n; ++i) {
      right_[i] = std::cos(std::cos(static_cast<double>(host[i])));
      wrong_[i] = std::cos(static_cast<double>(host[i]));
    }
  }
  std::string shape() const override { return "n=" + std::to_string(n_); }
  double flops() const override { return 0.0; }
  double bytes(size_t) const override { return 8.0 * static_cast<double>(n_); }
  void run(size_t v) override {
    calls_.log.push_back("run v" + std::to_string(v + 1));
    launch(v);
  }
  kernels::harness::Check validate(size_t v) override {
    calls_.log.push_back("validate v" + std::to_string(v + 1));
    if (v == 2) throw kernels::cuda::Error("kernel 'broken' block (0,0,0) thread (3,0,0): pretend misuse");
    out_.fill_bytes(0xFF);
    launch(v);
    dev_.synchronize();
    return cb::compare_device("out", out_, v == 1 ? wrong_ : right_, {1e-5, 1e-5});
  }

 private:
  void launch(size_t) { dev_.kernels().cos2.at(1).fn(out_.data(), in_.data(), static_cast<int>(n_)); }

  kernels::cuda::Device& dev_;
  size_t n_;
  kernels::Array<float> in_, out_;
  std::vector<double> right_, wrong_;
  Calls& calls_;
};

cb::Op fake_op(Calls& calls) {
  cb::Op op;
  op.name = "fake";
  op.summary = "cos2 with one right, one wrong, one broken and one unrunnable variant";
  op.sizes = {"64M"};
  op.test_sizes = {"1000"};
  op.variants = [](kernels::cuda::Device&) {
    return std::vector<cb::Variant>{
        {"v1", "right", "validates", false, {50}},
        {"v2", "wrong", "its reference is wrong", false, {50}},
        {"v3", "broken", "throws a device error", false, {50}},
        {"v4", "future", "needs a GPU nobody has", false, {990}},
    };
  };
  op.make = [&calls](kernels::cuda::Device& dev, const std::string& size, uint64_t) -> std::unique_ptr<cb::Problem> {
    return std::make_unique<FakeProblem>(dev, std::stoul(size), calls);
  };
  return op;
}

cb::RunOptions quick() {
  cb::RunOptions o;
  o.quick = true;
  return o;
}

}  // namespace

TEST_CASE("cuda bench: cos2 on the emulator is validated then timed with the napkin math", "[cuda][cuda-bench]") {
  const cb::Ceilings& c = emu_ceilings();
  CHECK(c.emulated);
  CHECK(c.copy_gbs > 0);
  CHECK(c.copy_bytes >= 8 * emu().info().l2_bytes);
  CHECK(c.fma_gflops > 0);

  const cb::Op& op = cb::op("cos2");
  std::ostringstream log;
  const std::vector<cb::Result> rows = cb::run_op(emu(), op, quick(), c, log);
  INFO(log.str());
  REQUIRE(rows.size() == op.variants(emu()).size() * op.test_sizes.size());
  for (const cb::Result& r : rows) {
    CHECK(r.valid);
    CHECK(r.timed);
    CHECK(r.timing.seconds.size() == 1);  // --quick: one timed run
    CHECK(r.bytes > 0);
    CHECK(r.gbs > 0);
    CHECK(r.frac_bw > 0);
    CHECK(r.flops == 0);
    CHECK(r.gflops == 0);
  }
  // v1 (two kernels) moves twice the bytes of v2 (fused).
  CHECK(rows[0].bytes == 2 * rows[1].bytes);
  CHECK_THAT(log.str(), Contains("validated: v1 ok  v2 ok"));
  CHECK_THAT(log.str(), Contains("EMULATED"));
  CHECK_THAT(cb::summary_line(rows[1]), Contains("v2 fused: "));
  CHECK_THAT(cb::summary_line(rows[1]), Contains("GB/s"));
}

TEST_CASE("cuda bench: every variant is validated before any is timed and a failing one is never timed",
          "[cuda][cuda-bench]") {
  Calls calls;
  const cb::Op op = fake_op(calls);
  std::ostringstream log;
  const std::vector<cb::Result> rows = cb::run_op(emu(), op, quick(), emu_ceilings(), log);
  INFO(log.str());
  REQUIRE(rows.size() == 4);

  // The order of calls: v1..v3 validated (v4 skipped), then only v1 run for timing.
  const std::vector<std::string> want = {"validate v1", "validate v2", "validate v3", "run v1"};
  CHECK(calls.log == want);

  CHECK(rows[0].valid);
  CHECK(rows[0].timed);
  CHECK(rows[0].gbs > 0);
  CHECK_FALSE(rows[1].valid);
  CHECK_FALSE(rows[1].timed);
  CHECK(rows[1].failed());
  CHECK_THAT(rows[1].note, Contains("FAILED validation"));
  CHECK_FALSE(rows[2].valid);
  CHECK(rows[2].failed());
  CHECK_THAT(log.str(), Contains("pretend misuse"));  // the device error is reported
  CHECK(rows[3].skipped);
  CHECK_FALSE(rows[3].failed());
  CHECK_THAT(rows[3].note, Contains("needs compute capability 99.0"));
  CHECK(cb::count_failed(rows) == 2);
  CHECK_THAT(log.str(), Contains("v2 wrong FAILED validation"));
  CHECK_THAT(log.str(), Contains("out[0] = "));  // the first mismatches, with their index
}

TEST_CASE("cuda bench: unknown variants and unwritten ops", "[cuda][cuda-bench]") {
  cb::RunOptions o = quick();
  o.variants = {"v9"};
  std::ostringstream log;
  CHECK_THROWS_WITH(cb::run_op(emu(), cb::op("cos2"), o, emu_ceilings(), log), Contains("v9"));
  // An op whose table is empty (not written yet) gives no rows and says so.
  cb::Op empty;
  empty.name = "unwritten";
  empty.variants = [](kernels::cuda::Device&) { return std::vector<cb::Variant>{}; };
  empty.make = [](kernels::cuda::Device&, const std::string&, uint64_t) -> std::unique_ptr<cb::Problem> {
    throw std::invalid_argument("unwritten: not written yet");
  };
  CHECK(cb::run_op(emu(), empty, quick(), emu_ceilings(), log).empty());
  CHECK_THAT(log.str(), Contains("unwritten: no versions"));
  CHECK_THROWS_AS(cb::op("no_such_op"), std::invalid_argument);
}

TEST_CASE("cuda bench: the JSON and markdown records name the device and say it was emulated", "[cuda][cuda-bench]") {
  Calls calls;
  std::ostringstream log;
  cb::Report rep;
  rep.device = emu().info();
  rep.host = kernels::harness::machine_info();
  rep.ceilings = emu_ceilings();
  rep.results = cb::run_op(emu(), cb::op("cos2"), quick(), rep.ceilings, log);
  const std::vector<cb::Result> fake = cb::run_op(emu(), fake_op(calls), quick(), rep.ceilings, log);
  rep.results.insert(rep.results.end(), fake.begin(), fake.end());

  std::ostringstream json, md;
  cb::write_json(json, rep);
  cb::write_markdown(md, rep);
  const std::string j = json.str(), m = md.str();
  CHECK_THAT(j, Contains("\"schema\": \"nnlab-cuda-bench/1\""));
  CHECK_THAT(j, Contains("\"emulated\": true"));
  CHECK_THAT(j, Contains(rep.device.name));
  CHECK_THAT(j, Contains("say nothing about the speed of any GPU"));
  CHECK_THAT(j, Contains("\"op\": \"cos2\""));
  CHECK_THAT(j, Contains("\"copy_gbs\": "));
  CHECK_THAT(j, Contains("\"note\": \"FAILED validation, not timed\""));
  CHECK_THAT(m, Contains("# CUDA kernels on " + rep.device.name));
  CHECK_THAT(m, Contains("**EMULATED"));
  CHECK_THAT(m, Contains("| cos2 | n=1000 | v2 fused |"));
  CHECK_THAT(m, Contains("FAILED validation"));

  // The record reads back: the goals know the device and that it was emulated.
  const cb::GoalsReport goals = cb::check_goals(j);
  CHECK(goals.device == rep.device.name);
  CHECK(goals.emulated);
  CHECK_FALSE(goals.all_pass());
  CHECK(cb::device_slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3");
  CHECK(cb::device_slug("  (odd) name!! ") == "odd-name");
}

TEST_CASE("cuda gpu: the runner measures ceilings and times cos2 on the GPU", "[cuda][device]") {
  std::string why;
  kernels::cuda::Device* gpu = kernels::cuda::gpu(&why);
  if (!gpu) {
    std::cout << "SKIPPED: no GPU (" << why << ")\n";
    return;
  }
  cb::CeilingOptions o;
  o.quick = true;
  const cb::Ceilings c = cb::measure_ceilings(*gpu, o);
  INFO("copy " << c.copy_gbs << " GB/s, FMA " << c.fma_gflops << " GFLOP/s");
  CHECK_FALSE(c.emulated);
  CHECK(c.copy_bytes >= 8 * gpu->info().l2_bytes);
  CHECK(c.copy_gbs > 10.0);      // any GPU of the last decade copies faster than this
  CHECK(c.fma_gflops > 100.0);
  std::ostringstream log;
  const std::vector<cb::Result> rows = cb::run_op(*gpu, cb::op("cos2"), quick(), c, log);
  INFO(log.str());
  REQUIRE_FALSE(rows.empty());
  for (const cb::Result& r : rows) {
    CHECK(r.timed);
    CHECK(r.gbs > 0);
  }
  CHECK_THAT(log.str(), !Contains("EMULATED"));
}

// ---- goals on hand-made records ----------------------------------------------------------------

namespace {

struct FakeRow {
  std::string op, shape, variant, name;
  bool peer;
  double median_ms, flops, bytes, workspace;
};

std::string record(const std::vector<FakeRow>& rows, double copy_gbs = 3000.0) {
  std::ostringstream os;
  os << "{\"schema\": \"nnlab-cuda-bench/1\", \"emulated\": false, \"warning\": \"\",\n"
     << " \"device\": {\"name\": \"Test GPU\", \"emulated\": false, \"sm\": 90},\n"
     << " \"ceilings\": {\"copy_gbs\": " << copy_gbs << ", \"copy_bytes\": 1, \"fma_gflops\": 60000},\n"
     << " \"results\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    const FakeRow& r = rows[i];
    os << (i ? ",\n" : "\n") << "  {\"op\": \"" << r.op << "\", \"shape\": \"" << r.shape << "\", \"variant\": \""
       << r.variant << "\", \"name\": \"" << r.name << "\", \"summary\": \"s \\\"q\\\"\", \"peer\": "
       << (r.peer ? "true" : "false") << ", \"valid\": true, \"timed\": " << (r.median_ms > 0 ? "true" : "false")
       << ", \"median_ms\": " << r.median_ms << ", \"samples_ms\": [1, 2], \"flops\": " << r.flops
       << ", \"bytes\": " << r.bytes << ", \"workspace_bytes\": " << r.workspace << ", \"note\": null}";
  }
  os << "\n]}\n";
  return os.str();
}

const double kMatmulFlops = 2.0 * 4096 * 4096 * 4096;
const double kScores1024 = 4.0 * 12 * 1024 * 1024 * 4;  // B=4, NH=12, T=1024: (B,NH,T,T) floats

// A record where every goal is met; `tweak` breaks one.
std::vector<FakeRow> passing_rows() {
  std::vector<FakeRow> rows = {
      {"matmul", "M=N=K=4096", "v1", "naive", false, 90.0, kMatmulFlops, 2e8, 0},
      {"matmul", "M=N=K=4096", "v6", "warp tiles", false, 1.2, kMatmulFlops, 2e8, 0},
      {"matmul", "M=N=K=4096", "v7", "tensor cores TF32", false, 0.3, kMatmulFlops, 2e8, 0},  // not compared
      {"matmul", "M=N=K=4096", "cublas", "cuBLAS SGEMM", true, 1.0, kMatmulFlops, 2e8, 0},
      {"matmul", "M=N=K=4096", "v11", "any layout (BF16)", false, 0.2, kMatmulFlops, 2e8, 0},  // not compared
      {"matmul", "M=N=K=4096", "cublas-tf32", "cuBLAS TF32", true, 0.25, kMatmulFlops, 2e8, 0},  // not compared
      {"matmul", "M=N=K=4096", "cublas-bf16", "cuBLAS GEMM (BF16)", true, 0.15, kMatmulFlops, 2e8, 0},  // not compared
      {"matmul", "M=N=K=1024", "v6", "warp tiles", false, 5.0, 2.0 * 1024 * 1024 * 1024, 1e7, 0},  // other size
      {"attention", "B=4 T=1024 C=768 NH=12", "v1", "unfused", false, 3.0, 1e10, 1e9, kScores1024},
      {"attention", "B=4 T=1024 C=768 NH=12", "v3", "flash", false, 2.0, 1e10, 1e8, 0},
      {"attention", "B=4 T=256 C=768 NH=12", "v1", "unfused", false, 0.1, 1e9, 1e8, kScores1024 / 16},
      {"attention", "B=4 T=256 C=768 NH=12", "v3", "flash", false, 0.2, 1e9, 1e7, 0},  // T < 1024: no goal
  };
  // Memory-bound ops: the fused version at 75% of the 3000 GB/s copy at the largest shape.
  for (const char* op : {"softmax", "layernorm_forward", "bias_gelu", "adamw"}) {
    const double bytes = 1.5e9;
    rows.push_back({op, "big", "v1", "unfused", false, 2.0, 0, 2 * bytes, 0});
    rows.push_back({op, "big", "v3", "fused", false, bytes / (0.75 * 3000e9) * 1e3, 0, bytes, 0});
    rows.push_back({op, "small", "v3", "fused", false, 0.01, 0, 1e6, 0});  // 3% of copy: not the largest
  }
  return rows;
}

const cb::Goal& goal(const cb::GoalsReport& rep, const std::string& starts) {
  for (const cb::Goal& g : rep.goals) {
    if (g.name.rfind(starts, 0) == 0) return g;
  }
  FAIL("no goal starting with " << starts);
  throw std::logic_error("unreachable");
}

FakeRow* find(std::vector<FakeRow>& rows, const std::string& op, const std::string& shape, const std::string& variant) {
  for (FakeRow& r : rows) {
    if (r.op == op && r.shape == shape && r.variant == variant) return &r;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("cuda goals: a record meeting every goal passes", "[cuda][cuda-bench]") {
  const cb::GoalsReport rep = cb::check_goals(record(passing_rows()));
  std::ostringstream out;
  cb::print_goals(out, rep);
  INFO(out.str());
  CHECK(rep.device == "Test GPU");
  CHECK_FALSE(rep.emulated);
  REQUIRE(rep.goals.size() == 6);
  CHECK(rep.all_pass());
  CHECK_THAT(goal(rep, "matmul").detail, Contains("v6 warp tiles"));
  CHECK_THAT(goal(rep, "matmul").detail, Contains("83.3% of cublas"));
  CHECK_THAT(goal(rep, "softmax").detail, Contains("75.0%"));
  CHECK_THAT(out.str(), Contains("6 of 6 goals pass"));
}

TEST_CASE("cuda goals: each goal fails on its own", "[cuda][cuda-bench]") {
  SECTION("matmul below 80% of SGEMM") {
    std::vector<FakeRow> rows = passing_rows();
    find(rows, "matmul", "M=N=K=4096", "v6")->median_ms = 1.5;  // 67%
    const cb::GoalsReport rep = cb::check_goals(record(rows));
    CHECK(goal(rep, "matmul").verdict == "FAIL");
    CHECK_THAT(goal(rep, "matmul").detail, Contains("66.7%"));
    CHECK_FALSE(rep.all_pass());
  }
  SECTION("no SGEMM peer: not measured") {
    std::vector<FakeRow> rows = passing_rows();
    find(rows, "matmul", "M=N=K=4096", "cublas")->median_ms = 0;  // not timed
    const cb::GoalsReport rep = cb::check_goals(record(rows));
    CHECK(goal(rep, "matmul").verdict == "NOT MEASURED");
    CHECK_FALSE(rep.all_pass());
  }
  SECTION("a memory-bound op below 70% of the copy bandwidth") {
    std::vector<FakeRow> rows = passing_rows();
    find(rows, "adamw", "big", "v3")->median_ms *= 1.25;  // 60%
    const cb::GoalsReport rep = cb::check_goals(record(rows));
    CHECK(goal(rep, "adamw").verdict == "FAIL");
    CHECK(goal(rep, "softmax").verdict == "PASS");
  }
  SECTION("a memory-bound op not in the record") {
    std::vector<FakeRow> rows = passing_rows();
    std::erase_if(rows, [](const FakeRow& r) { return r.op == "bias_gelu"; });
    const cb::GoalsReport rep = cb::check_goals(record(rows));
    CHECK(goal(rep, "bias_gelu").verdict == "NOT MEASURED");
  }
  SECTION("fused attention slower than unfused at T >= 1024") {
    std::vector<FakeRow> rows = passing_rows();
    find(rows, "attention", "B=4 T=1024 C=768 NH=12", "v3")->median_ms = 3.5;
    const cb::GoalsReport rep = cb::check_goals(record(rows));
    CHECK(goal(rep, "attention").verdict == "FAIL");
    CHECK_THAT(goal(rep, "attention").detail, Contains("T=1024"));
  }
  SECTION("fused attention with a workspace that grows like T^2") {
    std::vector<FakeRow> rows = passing_rows();
    find(rows, "attention", "B=4 T=1024 C=768 NH=12", "v3")->workspace = kScores1024 / 4;
    const cb::GoalsReport rep = cb::check_goals(record(rows));
    CHECK(goal(rep, "attention").verdict == "FAIL");
    CHECK_THAT(goal(rep, "attention").detail, Contains("NOT O(T)"));
  }
  SECTION("not a bench record") {
    CHECK_THROWS_AS(cb::check_goals("{\"results\": [}"), std::invalid_argument);
    CHECK_THROWS_AS(cb::check_goals("[1, 2]"), std::invalid_argument);
  }
}

TEST_CASE("lesson09: the speed-up of each rung over the one below", "[cuda][lesson09]") {
  std::vector<cb::Result> rows(4);
  rows[0].timed = true;
  rows[0].timing.median = 8.0;
  rows[1].timed = false;  // failed validation: skipped over
  rows[2].timed = true;
  rows[2].timing.median = 2.0;
  rows[3].timed = true;
  rows[3].peer = true;
  rows[3].timing.median = 1.0;
  const std::vector<double> s = lesson09::rung_speedups(rows);
  CHECK(s == std::vector<double>{0.0, 0.0, 4.0, 0.0});
  CHECK_THAT(lesson09::device_line(emu(), "no CUDA device found"), Contains("EMULATED on the CPU: no CUDA device found"));
}

// ---- from the command line ------------------------------------------------------------------------

TEST_CASE("nnlab cuda: info and a quick bench and goals and clear errors", "[cli][cuda-bench]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "nnlab-test-cuda-bench";
  fs::remove_all(dir);
  fs::create_directories(dir);

  auto r = run_program("nnlab", "cuda info");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Contains("cos2"));

  const std::string json = (dir / "cos2.json").string(), md = (dir / "cos2.md").string();
  r = run_program("nnlab", "cuda bench cos2 --device emu --quick --json " + json + " --md " + md);
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Contains("EMULATED"));
  CHECK_THAT(r.output, Contains("v2 fused"));
  CHECK(fs::exists(json));
  CHECK(fs::exists(md));

  r = run_program("nnlab", "cuda goals --json " + json);  // emulated: nothing to pass
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains("NOT MEASURED"));
  CHECK_THAT(r.output, Contains("meaningless"));
  {
    std::ofstream(dir / "good.json") << record(passing_rows());
  }
  r = run_program("nnlab", "cuda goals --json " + (dir / "good.json").string());
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Contains("6 of 6 goals pass"));

  struct Case {
    const char* args;
    const char* expect;
  };
  const Case cases[] = {
      {"cuda", "subcommand"},
      {"cuda bench no_such_op --device emu", "no_such_op"},
      {"cuda bench cos2 --device emu --sizes bogus", "bogus"},
      {"cuda bench cos2 --device emu --variants v9", "v9"},
      {"cuda bench --device tpu", "--device"},
      {"cuda goals --json /nonexistent/nnlab.json", "/nonexistent/nnlab.json"},
      {"cuda goals", "--json"},
  };
  for (const Case& c : cases) {
    r = run_program("nnlab", c.args);
    INFO("nnlab " << c.args << " -> " << r.status << ":\n" << r.output);
    CHECK(r.status != 0);
    CHECK(r.status < 128);
    CHECK_THAT(r.output, Contains(c.expect));
  }
  if (kernels::cuda::gpu() == nullptr) {
    r = run_program("nnlab", "cuda bench cos2 --device gpu");
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK_THAT(r.output, Contains("no usable GPU"));
  }
  fs::remove_all(dir);
}

TEST_CASE("lesson09: info and the emulator catching bugs and a quick ladder with its record", "[cli][lesson09]") {
  namespace fs = std::filesystem;
  auto r = run_program("lesson09", "info --device emu");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Contains("EMULATED on the CPU"));
  CHECK_THAT(r.output, Contains("says NOTHING about a GPU"));

  r = run_program("nnlab", "lesson09 --part emulator");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Contains("block_sum_early_return"));
  CHECK_THAT(r.output, Contains("__syncthreads"));
  CHECK_THAT(r.output, Contains("scale_off_by_one"));
  CHECK_THAT(r.output, Contains("neighbour_sum_uninitialised"));
  CHECK_THAT(r.output, !Contains("did NOT catch"));

  const fs::path json = fs::temp_directory_path() / "nnlab-test-lesson09-ladder.json";
  fs::remove(json);
  r = run_program("lesson09", "--part ladder --quick --device emu --json " + json.string());
  INFO(r.output);
  CHECK(r.status == 0);
  REQUIRE(fs::exists(json));
  std::ifstream in(json);
  std::stringstream text;
  text << in.rdbuf();
  CHECK_THAT(text.str(), Contains("\"emulated\": true"));
  fs::remove(json);

  for (const char* args : {"--part bogus", "--device tpu", "bogus"}) {
    r = run_program("lesson09", args);
    INFO(args << ": " << r.output);
    CHECK(r.status != 0);
    CHECK(r.status < 128);
  }
}
