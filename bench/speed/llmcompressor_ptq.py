"""Baseline: llm-compressor's model_free_ptq on the CPU, same input and scheme (W4A16, group 128).

    python3 llmcompressor_ptq.py CHECKPOINT_DIR OUT_DIR

Prints the wall time in seconds. Ignores what sparkulator's DFlash plan keeps dense (the norms are
not Linear layers, so only the projections and fc are quantized by both tools).
"""
import sys
import time

from llmcompressor import model_free_ptq


def main() -> None:
    src, dst = sys.argv[1], sys.argv[2]
    start = time.perf_counter()
    model_free_ptq(model_stub=src, save_directory=dst, scheme="W4A16", ignore=[], max_workers=1,
                   device="cpu")
    print(f"{time.perf_counter() - start:.3f}")


if __name__ == "__main__":
    main()
