"""Makes tests/ a package so that `tests.e2e` imports from the repository root."""
