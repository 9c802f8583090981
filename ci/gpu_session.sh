#!/usr/bin/env bash
# One batched H200 session: GPU tests, the kernels' GPU scripts (large statistical runs, CUDA graphs,
# performance), benchmarks. Runs with the machine's python3 (torch/triton preinstalled), no venv.
# Usage: OUT=/some/dir bash ci/gpu_session.sh [parts...]
#   parts: tests chain gumbel logits large sanitize verify bench launch   (default: all but verify, launch)
#          tests: the suite as pytest processes side by side (ci/gpu/pytest_shards.py): on a GPU it is
#          bound by Triton compiling each configuration, on the host's cores (H200: one process ran
#          ~1 test/s in run 140, eight ran all 1,312 tests in 360 s in run 144)
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT="${OUT:-$PWD/out}"; mkdir -p "$OUT"
parts=("$@"); [ ${#parts[@]} -eq 0 ] && parts=(tests chain gumbel logits large sanitize bench)
status=0
step() { local name=$1; shift; echo "=== $name: $*"; local t0=$SECONDS
  "$@" 2>&1 | tee "$OUT/$name.log"; local rc=${PIPESTATUS[0]}
  echo "=== $name rc=$rc in $((SECONDS - t0)) s"; [ "$rc" -eq 0 ] || status=1; }
for part in "${parts[@]}"; do
  case "$part" in
    tests)    step tests python3 ci/gpu/pytest_shards.py --out "$OUT" --timeout 560 tests ;;
    large)    step large python3 ci/gpu/large_index.py ;;
    chain)    step chain python3 ci/gpu/chain_gpu.py ;;
    gumbel)   step gumbel python3 ci/gpu/gumbel_gpu.py ;;
    logits)   step logits python3 ci/gpu/logits_gpu.py ;;
    bench)    step bench env OUT="$OUT/bench" bash benchmarks/gpu_session.sh ;;
    # Triton's launch path against the cached compiled launcher, interleaved (host µs and do_bench)
    launch)   step launch python3 benchmarks/host/launch_paths.py --out "$OUT/launch" ;;
    # the kernels at `full` (the references are certified on CPU); --max-seconds ends a slow run with
    # a complete report of what finished (exit 3), `timeout` is the backstop; the certificate
    # streams are gzipped (they reach 16+ MiB)
    verify)   step verify timeout 590 python3 -m specsample.verify.cli verify --device cuda --budget full \
                --adapter specsample --max-seconds 540 --report "$OUT/verify-report"
              gzip -f "$OUT"/verify-report/certificates*.json* 2>/dev/null ;;
    sanitize) step sanitize bash ci/gpu/sanitize.sh ;;
    *) echo "unknown part $part"; status=1 ;;
  esac
done
exit $status
