"""The real-vLLM end-to-end harness (docs/e2e.md): `python -m tests.e2e smoke|full --work DIR`."""
