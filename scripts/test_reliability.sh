#!/usr/bin/env bash
# scripts/test_reliability.sh: the bad-input checks of docs/reliability.md, as scripts/test.sh
# runs them after the test suite (the release build must exist):
#   1. the bad-input campaign, quick subset (scripts/bad_input_campaign.py): the real programs
#      on a few hundred bad inputs, each judged (crash, hang, memory, lost work, silent wrong
#      result, or a clear error); any case that is not a clear error or a correct result fails
#   2. every loader's libFuzzer target for FUZZ_SECONDS (15) each, with ASan + UBSan
#      (scripts/fuzz.sh, clang, build/fuzz)
#   3. the loaders' Catch2 tests under ASan + UBSan (scripts/sanitize_loaders.sh), built in
#      the same clang build as the fuzzers
#   bash scripts/test_reliability.sh
#   FUZZ_SECONDS=300 bash scripts/test_reliability.sh     longer fuzzing
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/release/bin
if [[ ! -x $bin/nnlab ]]; then
  echo "test_reliability: $bin/nnlab is missing: build the release preset first (bash scripts/test.sh does)" >&2
  exit 2
fi
echo "== bad-input campaign (quick subset; --full for every case)"
python3 scripts/bad_input_campaign.py --bin "$bin"
echo "== fuzzers (${FUZZ_SECONDS:-15} s each)"
FUZZ_SECONDS="${FUZZ_SECONDS:-15}" bash scripts/fuzz.sh
echo "== the loaders' tests under ASan + UBSan"
SANITIZE_BUILD=build/fuzz bash scripts/sanitize_loaders.sh
