"""The model_free_ptq worker of references.py: one interpreter for a pytest session, llmcompressor
imported once. Reads jobs as JSON lines on stdin ({"src", "dst", "scheme", "ignore"}; a scheme is a
preset name or a dict validated to a QuantizationScheme) and runs llm-compressor's model_free_ptq on
the CPU with one worker; answers each with one JSON line on stdout: {"ok": true} or {"ok": false,
"error": traceback}. Exits at the end of stdin.

Its text is part of every model_free_ptq reference's cache key: changing it recomputes them.
Error policy: a failing job is reported and the worker takes the next one; anything the libraries
print goes to stderr, so stdout carries the replies only.
"""
import json
import os
import sys
import traceback

replies = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)  # whatever the libraries print goes to stderr
sys.stdout = sys.stderr

from compressed_tensors.quantization import QuantizationScheme  # noqa: E402
from llmcompressor import model_free_ptq  # noqa: E402

for line in sys.stdin:
    job = json.loads(line)
    try:
        scheme = job["scheme"]
        if isinstance(scheme, dict):
            scheme = QuantizationScheme.model_validate(scheme)
        model_free_ptq(model_stub=job["src"], save_directory=job["dst"], scheme=scheme,
                       ignore=job["ignore"], max_workers=1, device="cpu")
        reply = {"ok": True}
    except Exception:  # noqa: BLE001 - reported to the test, which fails with it
        reply = {"ok": False, "error": traceback.format_exc()}
    replies.write(json.dumps(reply) + "\n")
    replies.flush()
