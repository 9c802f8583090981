#!/usr/bin/env bash
# The benchmark part of a GPU session, in one command (about 7 minutes on an H200):
#
#     OUT=/path/to/out bash benchmarks/gpu_session.sh
#
# 1. run_h200.py: records of ours and the same-run baselines, plot, per-GPU baseline file, targets table.
# 2. The pytest-benchmark suites (an independent second measurement), gated against the baseline just
#    written: shows the gate passing on unchanged kernels (SKIP_SUITE=1 skips this step).
# 3. run_h200.py again for chain only, with SPECSAMPLE_BENCH_SLOWED=chain (our chain launcher called twice
#    per call), gated against the same baseline: the gate must exit 1.
# Logs and every output stay under $OUT; gate exit codes are in $OUT/gate_exit_codes.txt.
# RUN_ARGS adds arguments to both run_h200.py calls (e.g. "--dry-run" to walk through the steps on a CPU).
set -u
PY=${PY:-python3}
OUT=${OUT:-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$(dirname "$0")/.."

$PY benchmarks/run_h200.py --out "$OUT" ${RUN_ARGS:-} 2>&1 | tee "$OUT/run_h200.log"
BASE=$(ls "$OUT"/baselines/*/baseline.json | head -n 1)
echo "baseline: $BASE"
: > "$OUT/gate_exit_codes.txt"

if [ "${SKIP_SUITE:-0}" = "0" ]; then
  SPECSAMPLE_BENCH_RECORDS="$OUT/suite_records.json" $PY -m pytest -q benchmarks --benchmark-only \
    --benchmark-json="$OUT/suite_benchmark.json" --benchmark-columns=median,iqr,rounds > "$OUT/suite.log" 2>&1
  echo "suite pytest exit: $?" | tee -a "$OUT/gate_exit_codes.txt"
  tail -n 5 "$OUT/suite.log"
  $PY benchmarks/compare.py "$OUT/suite_records.json" --baseline "$BASE" > "$OUT/gate_unchanged.log" 2>&1
  echo "gate exit, unchanged kernels (expect 0): $?" | tee -a "$OUT/gate_exit_codes.txt"
  tail -n 3 "$OUT/gate_unchanged.log"
fi

SPECSAMPLE_BENCH_SLOWED=chain $PY benchmarks/run_h200.py --out "$OUT/slowed" --only chain ${RUN_ARGS:-} \
  --selection target --no-plot > "$OUT/slowed.log" 2>&1
SLOWED=$(ls "$OUT"/slowed/*.json | grep -v -e bench_ | head -n 1)
$PY benchmarks/compare.py "$SLOWED" --baseline "$BASE" > "$OUT/gate_slowed.log" 2>&1
echo "gate exit, chain deliberately slowed (expect 1): $?" | tee -a "$OUT/gate_exit_codes.txt"
grep -c REGRESSION "$OUT/gate_slowed.log" | sed 's/^/regressions flagged: /'
tail -n 2 "$OUT/gate_slowed.log"
