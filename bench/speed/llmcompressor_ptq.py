"""Baseline: llm-compressor's model_free_ptq on the CPU, same input and scheme (default W4A16).

    python3 llmcompressor_ptq.py CHECKPOINT_DIR OUT_DIR [PRESET]

Prints the wall time in seconds. Ignores what sparkulator's DFlash plan keeps dense (the norms are
not Linear layers, so only the projections and fc are quantized by both tools).
"""
import sys
import time

from llmcompressor import model_free_ptq


def main() -> None:
    src, dst = sys.argv[1], sys.argv[2]
    scheme = sys.argv[3] if len(sys.argv) > 3 else "W4A16"
    start = time.perf_counter()
    model_free_ptq(model_stub=src, save_directory=dst, scheme=scheme, ignore=[], max_workers=1,
                   device="cpu")
    print(f"{time.perf_counter() - start:.3f}")


if __name__ == "__main__":
    main()
