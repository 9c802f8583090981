#!/usr/bin/env bash
# Nsight Compute counters for the kernels in profile_cases.py, plus the host-path cProfile.
# Usage (H200): OUT=/dir [PROFILE_ONLY=prefix,...] bash benchmarks/diagnostics/profile/run.sh
# PROFILE_ONLY: only the kernel cases whose names start with one of the prefixes, and no host profile.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
OUT="${OUT:-$PWD/out}"; mkdir -p "$OUT/profile"
export OUT="$OUT/profile" PYTHONPATH="$here/../../..${PYTHONPATH:+:$PYTHONPATH}"
[ -z "${PROFILE_ONLY:-}" ] && python3 "$here/profile_cases.py" host 2>&1 | tail -20
sections=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats
          --section Occupancy --section LaunchStats --section SchedulerStats
          --section MemoryWorkloadAnalysis --section InstructionStats)
metrics='regex:^sm__inst_executed_pipe_[a-z_]+\.avg\.pct_of_peak_sustained_active$,regex:^smsp__average_warps_issue_stalled_[a-z_]+_per_issue_active\.ratio$'
profile() { ncu --clock-control none --profile-from-start off --target-processes all "${sections[@]}" "$@" \
    --csv --page details python3 "$here/profile_cases.py" kernels "${PROFILE_ONLY:-}" > "$OUT/ncu_details.csv" 2> "$OUT/ncu.stderr"; }
profile --metrics "$metrics"; rc=$?
if [ $rc -ne 0 ]; then echo "ncu with extra metrics failed (rc=$rc), retrying with sections only"
  tail -5 "$OUT/ncu.stderr"; profile; rc=$?; fi
echo "ncu rc=$rc lines=$(wc -l < "$OUT/ncu_details.csv")"
tail -5 "$OUT/ncu.stderr"
python3 "$here/summarize.py" "$OUT/ncu_details.csv" "$OUT/cases.json" 2>&1 | tail -80
