// fuzz/fuzz_gpt_checkpoint.cpp: gpt::load_checkpoint on checkpoints whose metadata and
// tensor table are the fuzzer's, but whose bytes are well-formed.
//
// Raw-byte fuzzing (fuzz_safetensors) rarely gets past the integrity check, so it never
// reaches what the GPT loader does with the metadata: numbers for the model's sizes, the
// vocabulary, the step, the best loss. Here the input is a small text that DESCRIBES a
// checkpoint (fuzz/gpt_checkpoint_text.h); the harness writes it with nn::save_safetensors
// (so the file is valid and its checksum right, whatever the checksum covers) and loads it
// with gpt::load_checkpoint.
//
// Besides crashes, UB, stray exceptions and huge allocations (-malloc_limit_mb), a load
// that SUCCEEDS must give what the rules promise: finite weights and AdamW moments
// (NaN never passes a check), a step and an AdamW count that are not negative, a finite best
// loss, and a vocabulary of vocab_size characters. A violation aborts with its reason.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "fuzz/gpt_checkpoint_text.h"
#include "gpt/train.h"
#include "nn/check.h"

namespace {

[[noreturn]] void broken_promise(const std::string& what) {
  std::fprintf(stderr, "fuzz_gpt_checkpoint: load_checkpoint accepted a checkpoint, but %s\n", what.c_str());
  std::abort();
}

void check_finite(const gpt::Array<float>& mem, const char* what) {
  const std::vector<float> host = mem.to_vector();
  for (size_t i = 0; i < host.size(); ++i) {
    if (!std::isfinite(host[i])) {
      broken_promise(std::string(what) + "[" + std::to_string(i) + "] is not finite (NaN never passes a check)");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::scratch_dir() + "/input.safetensors";
  try {
    fuzz::write_described_checkpoint(path, fuzz::as_text(data, size));
  } catch (const nn::Error&) {
    return 0;  // a description the writer refuses (e.g. the reserved checksum key): not a checkpoint
  }
  try {
    const gpt::LoadedCheckpoint ck = gpt::load_checkpoint(path);
    check_finite(ck.model.params_memory, "a weight");
    if (ck.has_optimizer) {
      check_finite(ck.model.m_memory, "AdamW's m");
      check_finite(ck.model.v_memory, "AdamW's v");
    }
    if (ck.state.step < 0) broken_promise("its step is negative: " + std::to_string(ck.state.step));
    if (ck.model.adam_t < 0) broken_promise("its adam_t is negative: " + std::to_string(ck.model.adam_t));
    if (!std::isfinite(ck.state.best_val_loss)) broken_promise("its best_val_loss is not finite");
    if (ck.vocab.size() != ck.model.config.vocab_size) broken_promise("its vocabulary size differs from vocab_size");
  } catch (const nn::Error&) {
  }
  return 0;
}
