#!/usr/bin/env bash
# Recreate the two kernel versions that run_diag.py times, from git history (no frozen copies kept):
#   chain_v1.py   = specsample/kernels/chain.py at d42776b (the two-launch kernel of session 1)
#   chain_diag.py = specsample/kernels/chain.py at 902170c (the first one-launch kernel) + diag.patch
#                   (the `diag` switches and the `persist` option of run 11)
set -euo pipefail
cd "$(dirname "$0")"
git show d42776b:specsample/kernels/chain.py > chain_v1.py
git show 902170c:specsample/kernels/chain.py > chain_diag.py
patch -s chain_diag.py diag.patch
echo "wrote chain_v1.py and chain_diag.py in $PWD (untracked; carried to the device with the tree)"
