"""pytest plugin (entry point `specsample`): certification fixtures for engine test suites."""
