#!/usr/bin/env bash
# compute-sanitizer memcheck over the adversarial corpus for every kernel: must report 0 errors.
# Arguments go to fuzz_corpus.py (--small: all bad ids in one case, V in {1, 7, 33, 1025}).
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # fuzz_corpus.py imports specsample from the checkout
OUT="${OUT:-out}"; mkdir -p "$OUT"
compute-sanitizer --tool memcheck --error-exitcode 3 --print-limit 20 \
  python3 ci/gpu/fuzz_corpus.py --device cuda "$@" 2>&1 | tee "$OUT/sanitize.log" | tail -25
rc=${PIPESTATUS[0]}
grep -E "ERROR SUMMARY" "$OUT/sanitize.log" | tail -1
exit $rc
