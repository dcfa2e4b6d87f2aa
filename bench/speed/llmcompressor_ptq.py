"""Baseline: llm-compressor's model_free_ptq on the CPU, same input and scheme (default W4A16).

    python3 llmcompressor_ptq.py CHECKPOINT_DIR OUT_DIR [SCHEME]

SCHEME is a compressed-tensors preset name (W4A16, FP8_DYNAMIC, ...) or an integer width it has no
preset for, W2A16 .. W7A16 with an optional _ASYM suffix: that one is given to model_free_ptq as the
QuantizationScheme a user writes for it (int weights, group 128, targets ["Linear"]), which is what
sparkulator's --scheme w3a16 (w3a16-asym, ...) reproduces.

Prints the wall time in seconds. Ignores what sparkulator's DFlash plan keeps dense (the norms are
not Linear layers, so only the projections and fc are quantized by both tools).
"""
import re
import sys
import time

from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme
from compressed_tensors.quantization.quant_scheme import PRESET_SCHEMES
from llmcompressor import model_free_ptq


def scheme_for(name: str):
    """The preset name itself, or the QuantizationScheme of a WnA16[_ASYM] width with no preset."""
    width = re.fullmatch(r"W([2-8])A16(_ASYM)?", name.upper())
    if name.upper() in PRESET_SCHEMES or width is None:
        return name
    weights = QuantizationArgs(num_bits=int(width.group(1)), type="int",
                               symmetric=width.group(2) is None, strategy="group", group_size=128)
    return QuantizationScheme(targets=["Linear"], weights=weights)


def main() -> None:
    src, dst = sys.argv[1], sys.argv[2]
    scheme = scheme_for(sys.argv[3] if len(sys.argv) > 3 else "W4A16")
    start = time.perf_counter()
    model_free_ptq(model_stub=src, save_directory=dst, scheme=scheme, ignore=[], max_workers=1,
                   device="cpu")
    print(f"{time.perf_counter() - start:.3f}")


if __name__ == "__main__":
    main()
