"""Text, tokenizer and prompts for the e2e models (no model hub here).

The corpus is Python's standard library source: the first `TRAIN_FILES` `*.py` files train the BPE
tokenizer and the models; the files after them give held-out prompts. The tokenizer is byte-level BPE
with 2048 tokens and two special tokens: `<|endoftext|>` (id 0: BOS/EOS/PAD) and `<|mask|>` (id 1:
DFlash's mask token; the target never sees it in training).

Error policy: none of its own; a missing stdlib is an environment error that surfaces as an empty corpus
assertion.
"""

from __future__ import annotations

import glob
import os
import pathlib
import sysconfig

TRAIN_FILES = 100
VOCAB = 2048
EOS_TOKEN = "<|endoftext|>"
MASK_TOKEN = "<|mask|>"
EOS_ID, MASK_ID = 0, 1


def stdlib_files() -> list[str]:
    files = sorted(glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "*.py")))
    assert len(files) > TRAIN_FILES + 50, "Python's standard library source is missing"
    return files


def read(path: str, chars: int | None = None) -> str:
    text = open(path, encoding="utf-8", errors="replace").read()
    return text if chars is None else text[:chars]


def training_text() -> str:
    return "".join(read(f) for f in stdlib_files()[:TRAIN_FILES])


def prompts(count: int, chars: int, skip: int = 0) -> list[str]:
    """Held-out prompts: the beginnings of stdlib files the tokenizer and the models did not see."""
    files = stdlib_files()[TRAIN_FILES + skip:TRAIN_FILES + skip + count]
    return [read(f, chars) for f in files]


def write_tokenizer(out: pathlib.Path) -> None:
    """Trains the BPE tokenizer on the training files and saves it (tokenizer.json & co.) to `out`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=[EOS_TOKEN, MASK_TOKEN],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train(stdlib_files()[:TRAIN_FILES], trainer)
    assert tok.token_to_id(EOS_TOKEN) == EOS_ID and tok.token_to_id(MASK_TOKEN) == MASK_ID
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS_TOKEN, bos_token=EOS_TOKEN,
                            pad_token=EOS_TOKEN).save_pretrained(str(out))
