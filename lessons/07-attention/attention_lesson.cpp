// Lesson 07: attention, from loops to the op of nn/attention.h. The parts run top-down in
// the order the README tells the story: the loops, the scale, the softmax's numerics, heads,
// and the backward pass checked.
#include "lessons/07-attention/attention_lesson.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <sstream>
#include <tuple>

#include "nn/attention.h"
#include "nn/check.h"
#include "nn/cli_checks.h"
#include "nn/gradcheck.h"
#include "nn/rng.h"

namespace lesson07 {

namespace {

size_t at(int a) { return static_cast<size_t>(a); }

std::string num(double v, int width = 8, int digits = 3) {
  std::ostringstream os;
  if (std::isnan(v)) {
    os << std::setw(width) << "nan";  // one spelling on every platform (glibc prints -nan)
  } else if (std::isinf(v)) {
    os << std::setw(width) << (v > 0 ? "inf" : "-inf");
  } else {
    os << std::fixed << std::setprecision(digits) << std::setw(width) << v;
  }
  return os.str();
}

std::string sci(double v) {
  std::ostringstream os;
  os << std::scientific << std::setprecision(2) << v;
  return os.str();
}

// Prints a (rows, cols) block of a row-major matrix with leading dimension ld, one line per
// row, each row labelled by its position and token ("t=2 A").
void print_rows(std::ostream& os, const std::vector<std::string>& tokens, const double* m, int rows, int cols,
                int ld) {
  for (int r = 0; r < rows; ++r) {
    os << "    t=" << r << " " << std::left << std::setw(2) << tokens[at(r)] << std::right << " ";
    for (int c = 0; c < cols; ++c) os << num(m[at(r * ld + c)]);
    os << "\n";
  }
}

// The column header of a (T, T) matrix: key positions and their tokens.
void print_key_header(std::ostream& os, const std::vector<std::string>& tokens, const char* what) {
  os << "    " << std::left << std::setw(7) << what << std::right;
  for (size_t t2 = 0; t2 < tokens.size(); ++t2) os << std::setw(8) << (tokens[t2] + "(" + std::to_string(t2) + ")");
  os << "\n";
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0.0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// nn::attention_forward on one sequence (B = 1): the library's op, to check the loops against.
struct OpResult {
  std::vector<double> out, preatt, att;
};
OpResult run_op(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v, int T,
                int C, int NH) {
  OpResult r;
  const std::vector<double> qkv = pack_qkv(q, k, v, T, C);
  r.out.resize(at(T * C));
  r.preatt.resize(at(NH * T * T));
  r.att.resize(at(NH * T * T));
  nn::attention_forward(r.out.data(), r.preatt.data(), r.att.data(), qkv.data(), 1, T, C, NH);
  return r;
}

void ensure_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  NN_CHECK(!ec, "cannot create the output directory " << dir << ": " << ec.message() << " (try --out-dir)");
}

}  // namespace

void add_options(CLI::App& app, Options& o) {
  app.add_option("--part", o.part, "Which part to run")
      ->check(CLI::IsMember({"loops", "scale", "softmax", "multihead", "gradcheck", "all"}))
      ->capture_default_str();
  app.add_option("--seed", o.seed, "Seed of the random vectors (parts scale and gradcheck)")->check(nn::Seed())->capture_default_str();
  app.add_option("--queries", o.queries, "Part scale: random queries per head size")
      ->check(CLI::Range(10, 10000000))->capture_default_str();
  app.add_option("--keys", o.keys, "Part scale: keys each query is scored against (the softmax's length)")
      ->check(CLI::Range(2, 100000))->capture_default_str();
  app.add_flag("--quick", o.quick, "Fewer random queries in part scale: what the tests and notebooks run");
  app.add_option("--out-dir", o.out_dir, "Where the CSV and JSON files for the notebook go")->capture_default_str();
}

// ---- the lesson's functions -----------------------------------------------------------------

Example hand_made_example() {
  Example e;
  e.T = 5;
  e.C = 4;
  // Three kinds of token, each a vector of C = 4 channels. A and B share nothing, C shares
  // one channel with each: A.A = B.B = C.C = 2, A.C = B.C = 1, A.B = 0.
  const std::vector<double> A = {1, 0, 1, 0}, Bv = {0, 1, 0, 1}, Cv = {1, 1, 0, 0};
  e.tokens = {"A", "B", "A", "C", "B"};
  for (const auto* tok : {&A, &Bv, &A, &Cv, &Bv}) e.x.insert(e.x.end(), tok->begin(), tok->end());
  // Wq = Wk = 2 I: a query matches the keys of tokens like itself, and the 2 makes the
  // preferences clear after the 1/sqrt(4). Wv = I: the output is a mix of the token vectors,
  // readable by eye. A trained model learns its own three matrices.
  e.Wq.assign(at(e.C * e.C), 0.0);
  e.Wv.assign(at(e.C * e.C), 0.0);
  for (int i = 0; i < e.C; ++i) {
    e.Wq[at(i * e.C + i)] = 2.0;
    e.Wv[at(i * e.C + i)] = 1.0;
  }
  e.Wk = e.Wq;
  return e;
}

std::vector<double> project(const std::vector<double>& x, const std::vector<double>& W, int T, int C) {
  // x (T, C), W (C, C) -> y (T, C):  y[t][o] = sum_c x[t][c] W[o][c]
  std::vector<double> y(at(T * C), 0.0);
  for (int t = 0; t < T; ++t) {
    for (int o = 0; o < C; ++o) {
      double s = 0.0;
      for (int c = 0; c < C; ++c) s += x[at(t * C + c)] * W[at(o * C + c)];
      y[at(t * C + o)] = s;
    }
  }
  return y;
}

AttentionTrace attention_loops(const std::vector<double>& q, const std::vector<double>& k,
                               const std::vector<double>& v, int T, int C, int NH) {
  NN_CHECK(T >= 1 && C >= 1 && NH >= 1 && C % NH == 0,
           "attention_loops: need T, C, NH >= 1 and C divisible by NH, got T=" << T << " C=" << C << " NH=" << NH);
  AttentionTrace r;
  r.T = T;
  r.C = C;
  r.NH = NH;
  r.hs = C / NH;
  const int hs = r.hs;
  r.scores.assign(at(NH * T * T), 0.0);
  r.masked.assign(at(NH * T * T), 0.0);
  r.att.assign(at(NH * T * T), 0.0);
  r.out.assign(at(T * C), 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  const double minus_inf = -std::numeric_limits<double>::infinity();

  for (int h = 0; h < NH; ++h) {
    const int off = h * hs;  // head h owns channels [h*hs, (h+1)*hs) of q, k, v and out
    for (int t = 0; t < T; ++t) {
      double* scores = &r.scores[at((h * T + t) * T)];  // (T): row t of head h
      double* masked = &r.masked[at((h * T + t) * T)];
      double* att = &r.att[at((h * T + t) * T)];
      // scores[t2] = q_t . k_t2: how well key t2 answers query t
      for (int t2 = 0; t2 < T; ++t2) {
        double dot = 0.0;
        for (int i = 0; i < hs; ++i) dot += q[at(t * C + off + i)] * k[at(t2 * C + off + i)];
        scores[t2] = dot;
        // the causal mask: position t may not look at t2 > t (the future); -inf becomes
        // exp(-inf) = 0 in the softmax, so those keys get probability exactly 0
        masked[t2] = t2 <= t ? dot * scale : minus_inf;
      }
      // att = softmax(masked): exp(m_t2 - max) / sum_j exp(m_j - max)
      double maxval = minus_inf;
      for (int t2 = 0; t2 < T; ++t2) maxval = std::max(maxval, masked[t2]);  // t2 = t is never masked
      double sum = 0.0;
      for (int t2 = 0; t2 < T; ++t2) {
        att[t2] = std::exp(masked[t2] - maxval);
        sum += att[t2];
      }
      for (int t2 = 0; t2 < T; ++t2) att[t2] /= sum;
      // out_t = sum_t2 att[t2] v_t2: a weighted average of the values
      for (int i = 0; i < hs; ++i) {
        double o = 0.0;
        for (int t2 = 0; t2 < T; ++t2) o += att[t2] * v[at(t2 * C + off + i)];
        r.out[at(t * C + off + i)] = o;
      }
    }
  }
  return r;
}

std::vector<double> pack_qkv(const std::vector<double>& q, const std::vector<double>& k,
                             const std::vector<double>& v, int T, int C) {
  // q, k, v (T, C) -> qkv (T, 3C): row t is [q_t | k_t | v_t]
  std::vector<double> qkv(at(T * 3 * C));
  for (int t = 0; t < T; ++t) {
    for (int c = 0; c < C; ++c) {
      qkv[at(t * 3 * C + c)] = q[at(t * C + c)];
      qkv[at(t * 3 * C + C + c)] = k[at(t * C + c)];
      qkv[at(t * 3 * C + 2 * C + c)] = v[at(t * C + c)];
    }
  }
  return qkv;
}

std::vector<int> scale_head_sizes() { return {4, 16, 64, 256}; }

namespace {
// softmax over n scores, then its largest probability, its entropy -sum p log p (nats), and
// the trace of its Jacobian, sum p_i (1 - p_i): how much the probabilities move when the
// scores are nudged (0 for a one-hot, 1 - 1/n for uniform)
void softmax_stats(const std::vector<double>& s, double& maxp, double& entropy, double& jac) {
  const double m = *std::max_element(s.begin(), s.end());
  double sum = 0.0;
  for (double x : s) sum += std::exp(x - m);
  maxp = 0.0;
  entropy = 0.0;
  jac = 0.0;
  for (double x : s) {
    const double p = std::exp(x - m) / sum;
    maxp = std::max(maxp, p);
    if (p > 0) entropy -= p * std::log(p);
    jac += p * (1.0 - p);
  }
}
}  // namespace

ScaleRow measure_scale(int hs, int queries, int keys, uint64_t seed) {
  NN_CHECK(hs >= 1 && queries >= 1 && keys >= 2, "measure_scale: hs, queries >= 1 and keys >= 2");
  nn::Rng rng(seed + static_cast<uint64_t>(hs));
  ScaleRow r;
  r.hs = hs;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  std::vector<double> q(at(hs)), kk(at(hs)), raw(at(keys)), scaled(at(keys));
  double sum = 0.0, sum_sq = 0.0;
  for (int n = 0; n < queries; ++n) {
    for (double& x : q) x = rng.normal();
    for (int j = 0; j < keys; ++j) {
      for (double& x : kk) x = rng.normal();
      double dot = 0.0;  // q.k = sum of hs products of independent N(0,1): variance hs
      for (int i = 0; i < hs; ++i) dot += q[at(i)] * kk[at(i)];
      raw[at(j)] = dot;
      scaled[at(j)] = dot * scale;
      sum += dot;
      sum_sq += dot * dot;
    }
    double maxp = 0, ent = 0, jac = 0;
    softmax_stats(raw, maxp, ent, jac);
    r.maxp_raw += maxp;
    r.entropy_raw += ent;
    r.jac_raw += jac;
    softmax_stats(scaled, maxp, ent, jac);
    r.maxp_scaled += maxp;
    r.entropy_scaled += ent;
    r.jac_scaled += jac;
  }
  const double n = static_cast<double>(queries) * keys;
  const double mean = sum / n;
  r.var_raw = sum_sq / n - mean * mean;
  r.var_scaled = r.var_raw * scale * scale;  // the same dots, each times 1/sqrt(hs)
  r.maxp_raw /= queries;
  r.maxp_scaled /= queries;
  r.entropy_raw /= queries;
  r.entropy_scaled /= queries;
  r.jac_raw /= queries;
  r.jac_scaled /= queries;
  return r;
}

void softmax_naive(float* probs, const float* logits, int n) {
  // softmax(x)_i = exp(x_i) / sum_j exp(x_j), as the formula is written
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) {
    probs[i] = std::exp(logits[i]);
    sum += probs[i];
  }
  for (int i = 0; i < n; ++i) probs[i] /= sum;
}

void softmax_stable(float* probs, const float* logits, int n) {
  // softmax(x)_i = exp(x_i - max) / sum_j exp(x_j - max): the same numbers (the factor
  // exp(-max) cancels), but the largest exp is now exp(0) = 1, so nothing overflows and the
  // sum is at least 1
  float maxval = -std::numeric_limits<float>::infinity();
  for (int i = 0; i < n; ++i) maxval = std::max(maxval, logits[i]);
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) {
    probs[i] = std::exp(logits[i] - maxval);
    sum += probs[i];
  }
  for (int i = 0; i < n; ++i) probs[i] /= sum;
}

// ---- part 1: single-head attention in loops ---------------------------------------------------

int run_loops_part(const Options&) {
  std::ostream& os = std::cout;
  os << "== Part 1: single-head causal self-attention, in loops ==\n";
  const Example e = hand_made_example();
  const int T = e.T, C = e.C;
  os << "Five tokens of C = 4 channels, the sequence A B A C B (A.A = B.B = C.C = 2, A.C = B.C = 1, A.B = 0).\n"
     << "  x (T, C), the token vectors:\n";
  print_rows(os, e.tokens, e.x.data(), T, C, C);

  // the projections: three linear layers without bias
  const std::vector<double> q = project(e.x, e.Wq, T, C);
  const std::vector<double> k = project(e.x, e.Wk, T, C);
  const std::vector<double> v = project(e.x, e.Wv, T, C);
  os << "  q = x Wq^T (what each position looks for), Wq = 2 I:\n";
  print_rows(os, e.tokens, q.data(), T, C, C);
  os << "  k = x Wk^T (what each position offers to be found by), Wk = 2 I:\n";
  print_rows(os, e.tokens, k.data(), T, C, C);
  os << "  v = x Wv^T (what each position hands over when found), Wv = I:\n";
  print_rows(os, e.tokens, v.data(), T, C, C);

  const AttentionTrace a = attention_loops(q, k, v, T, C, 1);
  os << "  scores = q_t . k_t2 (row t: query t; column t2: key t2), every pair, the future too:\n";
  print_key_header(os, e.tokens, "");
  print_rows(os, e.tokens, a.scores.data(), T, T, T);
  os << "  scaled by 1/sqrt(hs) = 1/sqrt(" << a.hs << ") and masked: -inf where t2 > t (position t may not see the future):\n";
  print_key_header(os, e.tokens, "");
  print_rows(os, e.tokens, a.masked.data(), T, T, T);
  os << "  att = softmax of each row (exp(-inf) = 0; each row sums to 1):\n";
  print_key_header(os, e.tokens, "");
  print_rows(os, e.tokens, a.att.data(), T, T, T);
  os << "  out_t = sum_t2 att[t][t2] v_t2 (T, C): each position, a weighted average of the values it may see:\n";
  print_rows(os, e.tokens, a.out.data(), T, C, C);
  os << "  Row 4 (a B) puts " << num(a.att[at(4 * T + 1)], 0) << " on the B at 1 and " << num(a.att[at(4 * T + 4)], 0)
     << " on itself: a query finds the keys like itself.\n";

  // the same with the library's op: qkv (1, T, 3C) = [q | k | v], NH = 1
  const OpResult op = run_op(q, k, v, T, C, 1);
  const double d_out = max_abs_diff(a.out, op.out), d_att = max_abs_diff(a.att, op.att);
  const bool ok = d_out < 1e-12 && d_att < 1e-12;
  os << "cross-check: nn::attention_forward (NH = 1) on qkv = [q | k | v]: max |out - out_op| = " << sci(d_out)
     << ", max |att - att_op| = " << sci(d_att) << "  " << (ok ? "ok" : "MISMATCH") << "\n";
  NN_CHECK(ok, "the lesson's loops and nn::attention_forward disagree: see the differences above");
  return 0;
}

// ---- part 2: why 1/sqrt(hs) ----------------------------------------------------------------------

int run_scale_part(const Options& opts) {
  std::ostream& os = std::cout;
  const int queries = opts.quick ? std::min(opts.queries, 500) : opts.queries;
  os << "== Part 2: why the scores are divided by sqrt(hs) ==\n"
     << "q and k with N(0, 1) entries; " << queries << " queries per head size, each against " << opts.keys
     << " keys. The softmax over " << opts.keys << " keys:\n"
     << "uniform has max p = " << num(1.0 / opts.keys, 0) << ", entropy log(" << opts.keys
     << ") = " << num(std::log(static_cast<double>(opts.keys)), 0) << " nats and sum p(1-p) = "
     << num(1.0 - 1.0 / opts.keys, 0) << "; one-hot has 1, 0 and 0.\n"
     << "sum p(1-p) is the trace of the softmax's Jacobian: how much a nudge of the scores moves the probabilities.\n"
     << "    hs   var(q.k)  var(q.k/sqrt(hs))   max p: raw  scaled   entropy: raw  scaled   sum p(1-p): raw  scaled\n";
  ensure_dir(opts.out_dir);
  const std::string csv_path = opts.out_dir + "/scale.csv";
  std::ofstream csv(csv_path);
  NN_CHECK(csv.is_open(), "cannot write " << csv_path);
  csv << "hs,var_raw,var_scaled,maxp_raw,maxp_scaled,entropy_raw,entropy_scaled,jac_raw,jac_scaled\n";
  for (int hs : scale_head_sizes()) {
    const ScaleRow r = measure_scale(hs, queries, opts.keys, opts.seed);
    os << "  " << std::setw(4) << hs << num(r.var_raw, 11, 2) << num(r.var_scaled, 19, 3) << num(r.maxp_raw, 13)
       << num(r.maxp_scaled, 8) << num(r.entropy_raw, 15) << num(r.entropy_scaled, 8) << num(r.jac_raw, 18)
       << num(r.jac_scaled, 8) << "\n";
    csv << r.hs << "," << r.var_raw << "," << r.var_scaled << "," << r.maxp_raw << "," << r.maxp_scaled << ","
        << r.entropy_raw << "," << r.entropy_scaled << "," << r.jac_raw << "," << r.jac_scaled << "\n";
  }
  os << "Unscaled, the scores' spread grows as sqrt(hs): the softmax turns into a one-hot and its\n"
     << "Jacobian, the gradient's path to q and k, shrinks towards 0. Scaled, the variance is 1 at every head size.\n"
     << "wrote     " << csv_path << "\n";
  return 0;
}

// ---- part 3: the softmax's numerics -----------------------------------------------------------------

int run_softmax_part(const Options&) {
  std::ostream& os = std::cout;
  os << "== Part 3: the softmax in float, naive vs max-subtracted ==\n"
     << "exp overflows a float above ln(FLT_MAX) = " << num(std::log(static_cast<double>(std::numeric_limits<float>::max())), 0, 2)
     << " (in fp16 above ln(65504) = " << num(std::log(65504.0), 0, 2) << ")\n";
  struct Case {
    const char* what;
    std::vector<float> logits;
  };
  const Case cases[] = {
      {"small logits", {1.0f, 2.0f, 3.0f}},
      {"just past the limit", {89.0f, 88.0f, 87.0f}},
      {"large logits", {1000.0f, 999.0f, 998.0f}},
      {"large negative", {-1000.0f, -1001.0f, -1002.0f}},
  };
  bool stable_ok = true;
  for (const Case& c : cases) {
    const int n = static_cast<int>(c.logits.size());
    std::vector<float> naive(at(n)), stable(at(n));
    softmax_naive(naive.data(), c.logits.data(), n);
    softmax_stable(stable.data(), c.logits.data(), n);
    os << "  " << c.what << ": logits (";
    for (int i = 0; i < n; ++i) os << (i ? ", " : "") << c.logits[at(i)];
    os << ")\n    naive   exp(x) / sum exp(x):                 ";
    for (float p : naive) os << num(p, 9, 4);
    os << "\n    stable  exp(x - max) / sum exp(x - max):     ";
    for (float p : stable) {
      os << num(p, 9, 4);
      stable_ok = stable_ok && std::isfinite(p);
    }
    os << "\n";
  }
  os << "The naive one gives inf / inf = nan when exp overflows, and 0 / 0 = nan when every exp\n"
     << "underflows; subtracting the max is exact (exp(-max) cancels) and the largest term is exp(0) = 1.\n";
  NN_CHECK(stable_ok, "the stable softmax produced a non-finite value");
  return 0;
}

// ---- part 4: several heads -----------------------------------------------------------------------

int run_multihead_part(const Options& opts) {
  std::ostream& os = std::cout;
  os << "== Part 4: multi-head attention: the same tokens, NH = 1, 2, 4 heads ==\n"
     << "q, k, v as in part 1 (C = 4); head h sees only channels [h*hs, (h+1)*hs), hs = C / NH, and\n"
     << "its outputs fill the same channels of out: the heads are computed apart and concatenated.\n";
  const Example e = hand_made_example();
  const int T = e.T, C = e.C;
  const std::vector<double> q = project(e.x, e.Wq, T, C);
  const std::vector<double> k = project(e.x, e.Wk, T, C);
  const std::vector<double> v = project(e.x, e.Wv, T, C);

  ensure_dir(opts.out_dir);
  const std::string json_path = opts.out_dir + "/multihead.json";
  std::ofstream js(json_path);
  NN_CHECK(js.is_open(), "cannot write " << json_path);
  js << "{\"tokens\": [";
  for (int t = 0; t < T; ++t) js << (t ? ", " : "") << "\"" << e.tokens[at(t)] << "\"";
  js << "], \"runs\": [";
  bool all_ok = true;
  bool first_run = true;
  for (int NH : {1, 2, 4}) {
    const AttentionTrace a = attention_loops(q, k, v, T, C, NH);
    const OpResult op = run_op(q, k, v, T, C, NH);
    const double d = std::max(max_abs_diff(a.out, op.out), max_abs_diff(a.att, op.att));
    const bool ok = d < 1e-12;
    all_ok = all_ok && ok;
    os << "\n-- NH = " << NH << ", hs = " << a.hs << " --\n";
    js << (first_run ? "" : ", ") << "{\"NH\": " << NH << ", \"hs\": " << a.hs << ", \"att\": [";
    first_run = false;
    for (int h = 0; h < NH; ++h) {
      os << "  head " << h << " (channels " << h * a.hs << ".." << (h + 1) * a.hs - 1 << "), att:\n";
      print_key_header(os, e.tokens, "");
      const double* rows = &a.att[at(h * T * T)];
      print_rows(os, e.tokens, rows, T, T, T);
      js << (h ? ", " : "") << "[";
      for (int t = 0; t < T; ++t) {
        js << (t ? ", " : "") << "[";
        for (int t2 = 0; t2 < T; ++t2) js << (t2 ? ", " : "") << rows[at(t * T + t2)];
        js << "]";
      }
      js << "]";
    }
    js << "]}";
    os << "  out (heads concatenated):\n";
    print_rows(os, e.tokens, a.out.data(), T, C, C);
    os << "  cross-check with nn::attention_forward (NH = " << NH << "): max difference " << sci(d) << "  "
       << (ok ? "ok" : "MISMATCH") << "\n";
  }
  js << "]}\n";
  os << "\nWith 4 heads of one channel each, head 0 links tokens that share channel 0 (A and C), head 1\n"
     << "those that share channel 1 (B and C): each head attends by a different feature.\n"
     << "wrote     " << json_path << "\n";
  NN_CHECK(all_ok, "the lesson's loops and nn::attention_forward disagree: see the differences above");
  return 0;
}

// ---- part 5: the backward pass, checked ------------------------------------------------------------

int run_gradcheck_part(const Options& opts) {
  std::ostream& os = std::cout;
  os << "== Part 5: attention_backward against finite differences ==\n";
  // sizes that are not round: B = 2 sequences of T = 5, C = 6 channels in NH = 2 heads of 3
  const int B = 2, T = 5, C = 6, NH = 2;
  const int rows = B * T;  // (B, T, C) is (B*T, C) rows, so pack_qkv serves the whole batch
  nn::Rng rng(opts.seed);
  std::vector<double> q(at(rows * C)), k(at(rows * C)), v(at(rows * C)), r(at(rows * C));
  for (auto* buf : {&q, &k, &v, &r}) {
    for (double& x : *buf) x = rng.normal();
  }
  os << "B = " << B << ", T = " << T << ", C = " << C << ", NH = " << NH << " (hs = " << C / NH
     << "), double precision; the loss L = sum r * out for a fixed random r, so dout = r.\n";

  // L(q, k, v): pack, forward, weigh the outputs
  const size_t n_att = at(B * NH * T * T);
  auto loss = [&]() {
    const std::vector<double> qkv = pack_qkv(q, k, v, rows, C);
    std::vector<double> out(at(rows * C)), preatt(n_att), att(n_att);
    nn::attention_forward(out.data(), preatt.data(), att.data(), qkv.data(), B, T, C, NH);
    double L = 0.0;
    for (size_t i = 0; i < out.size(); ++i) L += r[i] * out[i];
    return L;
  };

  // the analytic gradient: forward, then backward from dout = r
  const std::vector<double> qkv = pack_qkv(q, k, v, rows, C);
  std::vector<double> out(at(rows * C)), preatt(n_att), att(n_att);
  nn::attention_forward(out.data(), preatt.data(), att.data(), qkv.data(), B, T, C, NH);
  std::vector<double> dqkv(qkv.size()), dpreatt(n_att), datt(n_att);
  nn::attention_backward(dqkv.data(), dpreatt.data(), datt.data(), r.data(), qkv.data(), att.data(), B, T, C, NH);
  std::vector<double> dq(q.size()), dk(k.size()), dv(v.size());
  for (int t = 0; t < rows; ++t) {
    for (int c = 0; c < C; ++c) {
      dq[at(t * C + c)] = dqkv[at(t * 3 * C + c)];
      dk[at(t * C + c)] = dqkv[at(t * 3 * C + C + c)];
      dv[at(t * C + c)] = dqkv[at(t * 3 * C + 2 * C + c)];
    }
  }

  bool all_ok = true;
  os << "central differences, h = 1e-6:\n";
  for (auto [name, param, grad] : {std::tuple{"dq", &q, &dq}, std::tuple{"dk", &k, &dk}, std::tuple{"dv", &v, &dv}}) {
    const nn::GradCheckResult g = nn::check_gradient(loss, *param, *grad);
    os << "  " << name << "  max |analytic - numeric| = " << sci(g.max_abs_err) << "  max relative " << sci(g.max_rel_err)
       << "  (" << param->size() << " entries)  " << (g.ok ? "ok" : "MISMATCH") << "\n";
    if (!g.ok) os << g.report;
    all_ok = all_ok && g.ok;
  }

  // The softmax's backward: d att_j / d p_i = att_j (delta_ij - att_i), a (T, T) Jacobian.
  // Through it, dp_i = sum_j datt_j att_j (delta_ij - att_i) = att_i (datt_i - sum_j att_j datt_j):
  // one dot product per row instead of a matrix-vector product. Check the backward's
  // O(T) result against the full Jacobian for the last row of sequence 0, head 0.
  const int t = T - 1;
  const double* a = &att[at(t * T)];
  const double* da = &datt[at(t * T)];
  const double* dp = &dpreatt[at(t * T)];
  double worst = 0.0;
  for (int i = 0; i <= t; ++i) {
    double full = 0.0;
    for (int j = 0; j <= t; ++j) full += da[j] * a[j] * ((i == j ? 1.0 : 0.0) - a[i]);
    worst = std::max(worst, std::fabs(full - dp[i]));
  }
  const bool jac_ok = worst < 1e-12;
  all_ok = all_ok && jac_ok;
  os << "softmax Jacobian, last row: full (T x T) product vs the O(T) form in attention_backward: max difference "
     << sci(worst) << "  " << (jac_ok ? "ok" : "MISMATCH") << "\n";
  os << (all_ok ? "PASS" : "FAIL") << ": attention_backward " << (all_ok ? "agrees" : "DISAGREES")
     << " with finite differences\n";
  return all_ok ? 0 : 1;
}

int run(const Options& opts) {
  if (opts.part == "loops") return run_loops_part(opts);
  if (opts.part == "scale") return run_scale_part(opts);
  if (opts.part == "softmax") return run_softmax_part(opts);
  if (opts.part == "multihead") return run_multihead_part(opts);
  if (opts.part == "gradcheck") return run_gradcheck_part(opts);
  for (auto* part : {&run_loops_part, &run_scale_part, &run_softmax_part, &run_multihead_part, &run_gradcheck_part}) {
    if (const int rc = part(opts); rc != 0) return rc;
    std::cout << "\n";
  }
  return 0;
}

}  // namespace lesson07
