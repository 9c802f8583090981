#!/usr/bin/env bash
# Nsight Compute source counters: warp-stall samples per SASS instruction of one kernel.
# Usage (H200): OUT=/dir PROFILE_ONLY="case prefix" KERNEL=regex NAME=label bash source.sh
# Profiles the kernels named by KERNEL (a regex on the kernel name) in the profile_cases.py cases
# that PROFILE_ONLY selects, then writes $OUT/source_$NAME.csv (the report's source page, SASS) and
# prints summarize_source.py's table: where in the kernel the stall samples fall, and why.
# SAMPLING=n sets ncu's --warp-sampling-interval (2^(5+n) cycles; 0 for kernels of a few µs).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
OUT="${OUT:-$PWD/out}"; tmp="$OUT/tmp"; mkdir -p "$tmp"
export PYTHONPATH="$here/../../..${PYTHONPATH:+:$PYTHONPATH}"
name="${NAME:-kernel}"
OUT="$tmp" ncu --clock-control none --profile-from-start off --target-processes all --section SourceCounters \
    --section WarpStateStats ${SAMPLING:+--warp-sampling-interval "$SAMPLING"} -k "regex:${KERNEL:-.}" -c "${COUNT:-1}" -f -o "$tmp/$name" \
    python3 "$here/profile_cases.py" kernels "${PROFILE_ONLY:-}" > "$tmp/$name.log" 2>&1
echo "ncu rc=$? $(tail -2 "$tmp/$name.log")"
ncu --import "$tmp/$name.ncu-rep" --page source --csv --print-source sass > "$OUT/source_$name.csv" \
    2> "$tmp/$name.import.err" || { echo "source page failed:"; tail -5 "$tmp/$name.import.err"; }
python3 "$here/summarize_source.py" "$OUT/source_$name.csv"
