"""The vLLM module map generator (tools/vllm_module_map/generate.py is its command line).

Modules: configs (what is built: quantization config, tiny configs, method rules), fake_cuda (the
faked CUDA platform for a wheel-only release), scan (the model files' source and checkpoint
names), build (building each model in vLLM and recording its modules), host (the CPU held
fixed), docs (docs/draft-kinds.md from the committed maps), changes (its per-release changes),
release / wheel / release_env (the one-command release procedure: wheel, cache, venv).
Error policy: none of its own;
importing it imports no vLLM.
"""
