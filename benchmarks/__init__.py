"""specsample benchmarks: device timing against the memory floor, same-run baselines, regression gate.

Not installed with the package (pyproject only ships `specsample*`); run from the repository root:
`python benchmarks/run_h200.py --out $OUT`, `python -m pytest benchmarks --benchmark-only`,
`python benchmarks/compare.py RUN.json --baseline-dir benchmarks/baselines`. See docs/benchmarks.md.
"""
