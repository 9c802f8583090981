"""Example external samplers for `specsample verify --target` (planted bugs included, on purpose)."""
