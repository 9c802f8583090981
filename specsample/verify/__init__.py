"""specsample.verify: the certification engine behind `specsample verify` / `make verify`.

Module map:
  protocol          the sampler protocol (our chain_rejection_sample signature) and adapters:
                    specsample kernels, float64 references, SGLang/vLLM/FlashInfer, --target
  cases, strategies case families (stats.md §8.7) and their hypothesis strategies
  certify, edges    chain certificates: grid, coupling, coupling_seeded, conditional, accepted_length,
                    joint, edge, determinism, batch_invariance, cuda_graph
  gumbel_family     fast_sample certificates: coupling_seeded, gof, plackett_luce, zero_mass
  logits_family     rejection_sample_logits certificates: coupling_seeded, greedy, conditional
  exact_laws        exact laws in the verifier's cell layout (from specsample.reference.laws)
  stats_bridge      designed GOF runs from specsample.stats that report instead of raise
  budgets           ci / standard / full
  runner            sampler x case x law -> CertRecord
  mutable_reference, mutants   planted bugs (reference copies and textual kernel patches)
  calibrate         vary-the-seed false-fail measurement
  report, cli       report directory and the command line
  pytest_plugin     --specsample-budget and the specsample_certify fixture
See docs/verify.md.
"""
