"""The mutant catalogue's part `kernel_logits`: the logits kernels' mutants, each killed at budget `ci` on
two cases (tests/verify/test_mutants.py states the design; tests/verify/mutant_parts.py the split)."""

from tests.verify.mutant_parts import part_module

mutant_run, test_every_mutant_is_killed, test_real_kernels_unharmed_after_the_mutants = part_module(
    "kernel_logits"
)
