// fuzz/fuzz_config.cpp: gpt::apply_config_file, the `--config FILE` reader of `nnlab gpt
// train` (and lesson 08), on arbitrary text.
//
// The file is one `key = value` a line (gpt/cli.h). The harness mounts the real train flags
// on a CLI11 app, parses an empty command line, then applies the file: unknown keys, values
// the flags' checks refuse, quotes, comments, sections, CR/LF, NUL bytes and very long lines
// must end in nn::Error naming the file. A float option that comes out of a file must be
// finite (NaN never passes a check): a NaN that gets through aborts with its name.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <CLI/CLI.hpp>

#include "fuzz/fuzz_util.h"
#include "gpt/cli.h"
#include "nn/check.h"

namespace {

void require_finite(double v, const char* name) {
  if (!std::isfinite(v)) {
    std::fprintf(stderr, "fuzz_config: the config file set %s to %g, and apply_config_file accepted it\n", name, v);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_scratch("run.toml", fuzz::as_text(data, size));
  CLI::App app{"fuzz", "train"};
  gpt::TrainOptions o;
  gpt::add_train_flags(app, o);
  const char* argv[] = {"train"};
  app.parse(1, const_cast<char**>(argv));
  try {
    gpt::apply_config_file(app, path);
  } catch (const nn::Error&) {
    return 0;
  }
  require_finite(o.dropout, "dropout");
  require_finite(o.val_fraction, "val_fraction");
  require_finite(o.lr, "lr");
  require_finite(o.min_lr, "min_lr");
  require_finite(o.weight_decay, "weight_decay");
  require_finite(o.beta1, "beta1");
  require_finite(o.beta2, "beta2");
  require_finite(o.eps, "eps");
  require_finite(o.grad_clip, "grad_clip");
  require_finite(o.time_budget_s, "time_budget");
  require_finite(o.temperature, "temperature");
  return 0;
}
