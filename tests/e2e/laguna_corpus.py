"""Stdlib text, the project's BPE tokenizer and held-out prompts for the Laguna e2e models.

STAND-IN: branch e2e owns tests/e2e/corpus.py (the same recipe as the heredoc in
scripts/e2e-vllm-cpu.sh: a byte-level BPE with vocab 2048 trained on the first 100 stdlib files,
prompts from the files after them). Until it is merged, this module implements that recipe; the lead
replaces the imports in laguna*.py by tests.e2e.corpus. One addition the Laguna draft needs: a
`<|mask|>` special token, DFlash's `mask_token_id` (the draft feeds it at the K masked query slots;
its embedding is the target's, which never trains on it, so it stays a distinct vector).
"""

from __future__ import annotations

import glob
import os
import sysconfig
from pathlib import Path

VOCAB = 2048
EOS = "<|endoftext|>"
MASK = "<|mask|>"
TRAIN_FILES = 100


def stdlib_files() -> list[str]:
    return sorted(glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "*.py")))


def read(path: str, chars: int | None = None) -> str:
    text = open(path, encoding="utf-8", errors="replace").read()
    return text if chars is None else text[:chars]


def train_text() -> str:
    return "".join(read(f) for f in stdlib_files()[:TRAIN_FILES])


def prompts(count: int, chars: int = 600) -> list[str]:
    """Held-out code: files after the tokenizer's and the training's corpus."""
    return [read(f, chars) for f in stdlib_files()[TRAIN_FILES:TRAIN_FILES + count]]


def build_tokenizer(out: Path):
    """Trains the BPE and saves it (tokenizer.json and friends) into `out`; returns the fast
    tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=[EOS, MASK],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train(stdlib_files()[:TRAIN_FILES], trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, bos_token=EOS,
                                   pad_token=EOS, additional_special_tokens=[MASK])
    fast.save_pretrained(str(out))
    return fast
