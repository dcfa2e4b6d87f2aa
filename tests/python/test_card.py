"""`sparkulator card` end to end: a DFlash draft quantized by sparkulator, benchmarked on two stand-in
"machines" (tests/python/standin_server.py: NOT a real LLM server, with known ground truth), turned
into a model card. The card's numbers must equal the JSON they came from, its front matter must parse
as YAML, its Markdown must render (markdown-it-py), and updating it must keep the author's prose.
The card of every scheme row (listed by `quantize --help`) must name its own format, number type
and kernels."""
import json
import os
import re
import sys
import xml.etree.ElementTree as ET

import pytest
import yaml
from markdown_it import MarkdownIt

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_bench import bench, standin, standin_per_module  # noqa: E402,F401  (fixtures)
from test_bench import PROMPTS, write_prompts  # noqa: E402
from formats_sources import layout_flags  # noqa: E402


@pytest.fixture(scope="module")
def run(spk):
    """conftest's spk with any exit code (the tests check it) and card's old 120 s limit."""
    return lambda *args: spk(*args, expect=None, timeout=120)


@pytest.fixture(scope="module")
def made_once(standin_per_module, bench, run, tmp_path_factory):
    """(draft folder, [results json paths], card path) with the card written, once per module:
    a quantize and two benches against stand-in servers (~10 s, ~40 s under the sanitizers)."""
    standin = standin_per_module
    tmp_path = tmp_path_factory.mktemp("card")
    src, draft = tmp_path / "src", tmp_path / "draft-w4a16"
    assert run("example", src, "--family", "dflash").returncode == 0
    (src / "README.md").write_text("---\nlicense: apache-2.0\n---\nThe source's card.\n")
    r = run("quantize", src, draft, "--target-precision", "fp8")
    assert r.returncode == 0, r.stderr
    files = []
    for machine in (1, 2):
        a, b = standin("--accept-pattern", "1"), standin("--accept-pattern", "2,1,3,0")
        out = tmp_path / f"m{machine}.json"
        r = bench("--arm", "bf16=" + a, "--arm", "w4a16=" + b, "--prompt-lengths", "16,48",
                  "--repeats", "3", "--warmup", "1", "--max-tokens", "21", "--json", str(out))
        assert r.returncode == 0, r.stderr
        files.append(out)
    card = tmp_path / "card" / "README.md"
    card.parent.mkdir()
    args = ["card", draft, "--target", "org/target", "--base-model", "org/draft", "--repo-id",
            "org/draft-w4a16", "-o", card]
    for f in files:
        args += ["--bench", f]
    r = run(*args)
    assert r.returncode == 0, r.stderr
    return draft, files, card


@pytest.fixture
def made(made_once, tmp_path):
    """made_once's folders copied for one test, which may edit them."""
    import shutil
    draft, files, card = made_once
    root = draft.parent
    shutil.copytree(root, tmp_path / "made", symlinks=True)
    moved = lambda p: tmp_path / "made" / p.relative_to(root)  # noqa: E731
    return moved(draft), [moved(f) for f in files], moved(card)


def front_matter(text):
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n")[1])


def section(text, heading):
    start = text.index(heading)
    nxt = text.find("\n### ", start + 1)
    return text[start:nxt if nxt > 0 else len(text)]


def table_rows(text, first_cell):
    return [[c.strip() for c in line.strip("|").split("|")]
            for line in text.splitlines() if line.startswith("| " + first_cell + " |")]


def test_front_matter_parses_and_carries_the_source(made):
    draft, files, card = made
    fm = front_matter(card.read_text())
    assert fm["base_model"] == "org/draft" and fm["base_model_relation"] == "quantized"
    assert fm["library_name"] == "vllm" and fm["pipeline_tag"] == "text-generation"
    assert fm["license"] == "apache-2.0"  # from the source's README front matter
    assert {"w4a16", "int4", "dflash", "speculative-decoding"} <= set(fm["tags"])


def test_markdown_renders(made):
    draft, files, card = made
    html = MarkdownIt("commonmark").enable("table").render(card.read_text().split("---\n", 2)[2])
    assert html.count("<table>") >= 2 + 3 * len(files) + 2  # size, recipe, per machine, pooled
    assert "<h2>Serving with vLLM</h2>" in html and "<h3>Pooled across machines (" in html
    assert '<img src="bench-1.svg"' in html


def test_numbers_equal_the_json(made):
    draft, files, card = made
    text = card.read_text()
    record = json.loads((draft / "config.json").read_text())["sparkulator"]
    assert f"| source | {record['source_tensor_bytes'] / 2**30:.3f} GiB ({record['source_tensor_bytes']} bytes) |" in text
    assert "**fp8** target" in text
    [serve] = [line for line in text.splitlines() if line.startswith("vllm serve ")]
    assert serve.startswith("vllm serve org/target ") and '"model":"org/draft-w4a16"' in serve
    pooled = {"bf16": [0, 0], "w4a16": [0, 0]}
    for i, f in enumerate(files, 1):
        res = json.loads(f.read_text())
        part = section(text, f"### Machine {i}:")
        cmp = res["comparisons"][0]
        for c, cell in enumerate(res["arms"][0]["cells"]):
            n = cell["prompt_tokens"]
            [row] = table_rows(part, str(n))
            for a, arm in enumerate(res["arms"]):
                ac = arm["cells"][c]
                assert row[1 + a].startswith(f"{ac['mean_tok_s']:.1f} ± {ac['stdev_tok_s']:.1f}")
            cc = cmp["cells"][c]
            import math
            assert row[3].startswith("%+.1f%%" % ((math.exp(cc["log_ratio"]) - 1) * 100))
            assert f"{(cc['ci_low'] - 1) * 100:+.1f}% .. {(cc['ci_high'] - 1) * 100:+.1f}%" in row[3]
        for arm in res["arms"]:
            s = arm["spec_decode"]
            [row] = table_rows(part, arm["name"])[:1]
            assert row[1:4] == [f"{s['draft_tokens']:.0f}", f"{s['accepted_tokens']:.0f}",
                                f"{s['acceptance_rate'] * 100:.1f}%"]
            pooled[arm["name"]][0] += s["draft_tokens"]
            pooled[arm["name"]][1] += s["accepted_tokens"]
        svg = ET.parse(card.parent / f"bench-{i}.svg").getroot()
        bars = [e for e in svg.iter() if e.tag.endswith("rect") and e.get("class") == "bar"]
        assert len(bars) == len(cmp["cells"]) + 1  # one per prompt length and the overall delta
    pool = section(text, "### Pooled across machines")
    for name, (drafted, accepted) in pooled.items():
        [row] = [r for r in table_rows(pool, name) if len(r) == 6]
        assert row[1:5] == ["2", f"{drafted:.0f}", f"{accepted:.0f}", f"{100 * accepted / drafted:.1f}%"]


def tensor_bytes(folder):
    """Bytes of every tensor's data in a folder's safetensors files (from their headers)."""
    import struct
    total = 0
    for f in folder.glob("*.safetensors"):
        with open(f, "rb") as fh:
            header = json.loads(fh.read(struct.unpack("<Q", fh.read(8))[0]))
        total += sum(t["data_offsets"][1] - t["data_offsets"][0] for k, t in header.items() if k != "__metadata__")
    return total


def test_quantize_records_what_the_card_needs(made, tmp_path):
    draft, files, card = made
    record = json.loads((draft / "config.json").read_text())["sparkulator"]
    assert record["source_tensor_bytes"] == tensor_bytes(draft.parent / "src")
    assert record["output_tensor_bytes"] == tensor_bytes(draft)
    assert record["group_size"] == 128 and record["family"] == "dflash" and record["data_free"]
    kept = {k["tensor"] for k in record["kept_dense"]}
    assert kept and all(re.search(r"self_attn\.(q|k|v)_proj\.weight$", t) for t in kept)
    assert all(f"`{t}`" in card.read_text() for t in kept)


def test_update_keeps_prose_and_refuses_to_overwrite(made, run):
    draft, files, card = made
    text = card.read_text()
    edited = text.replace("<!-- sparkulator card: generated begin", "## Why this draft\nBecause.\n\n"
                          "<!-- sparkulator card: generated begin").replace("tags:", "datasets:\n- a/b\ntags:")
    card.write_text(edited + "\n## Citation\nCite us.\n")
    r = run("card", draft, "-o", card)
    assert r.returncode == 2 and "--update" in r.stderr and card.read_text().endswith("Cite us.\n")
    r = run("card", draft, "-o", card, "--update")
    assert r.returncode == 0, r.stderr
    new = card.read_text()
    assert "## Why this draft\nBecause." in new and new.endswith("## Citation\nCite us.\n")
    assert front_matter(new)["datasets"] == ["a/b"]
    assert "## Benchmarks" not in new  # no --bench this time: the generated part was replaced


def test_not_a_sparkulator_checkpoint_is_a_clear_error(tmp_path, run):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text('{"model_type": "llama"}')
    r = run("card", tmp_path / "m")
    assert r.returncode == 2 and "config.json" in r.stderr and "sparkulator quantize" in r.stderr


def _set(path, value):
    """A mutation of a results document: the field at `path` (keys and indices) becomes `value`."""
    def mutate(doc):
        at = doc
        for key in path[:-1]:
            at = at[key]
        at[path[-1]] = value
        return json.dumps(doc)
    return mutate


# A malformed --bench file (one field of a real results file changed, or the file cut short), and
# the end of the error it must give after "FILE: ".
MALFORMED_BENCH = {
    "arm_name_number": (_set(["arms", 1, "name"], 7), "arms[1].name: expected a string, got a number"),
    "acceptance_count_string": (
        _set(["arms", 1, "spec_decode", "accepted_tokens"], "180"),
        "arms[1].spec_decode.accepted_tokens: expected a number or null, got a string"),
    "arms_not_a_list": (_set(["arms"], "none"), "arms: expected an array, got a string"),
    "comparison_arm_number": (_set(["comparisons", 0, "arm"], 2),
                              "comparisons[0].arm: expected a string, got a number"),
    "truncated": (lambda doc: json.dumps(doc)[:200], "not valid JSON"),
    "interval_not_a_list": (_set(["arms", 1, "spec_decode", "per_position_ci_low"], "x"),
                            "arms[1].spec_decode.per_position_ci_low: expected an array, got a string"),
    "interval_bound_string": (
        _set(["arms", 1, "spec_decode", "mean_acceptance_length_ci_high"], "2.5"),
        "arms[1].spec_decode.mean_acceptance_length_ci_high: expected a number or null, got a string"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED_BENCH))
def test_malformed_bench_file_is_an_input_error_naming_the_field(made, run, case):
    """A --bench file of the wrong shape exits 2 with the file and the field, never aborts."""
    draft, files, card = made
    mutate, message = MALFORMED_BENCH[case]
    bad = files[0].parent / f"bad-{case}.json"
    bad.write_text(mutate(json.loads(files[0].read_text())))
    r = run("card", draft, "--bench", files[1], "--bench", bad, "-o", card.parent / "new.md")
    assert r.returncode == 2, (r.returncode, r.stderr)
    errors = [line for line in r.stderr.splitlines() if "error" in line]
    assert errors == [f"sparkulator: error: {bad}: {message}"], r.stderr
    assert not (card.parent / "new.md").exists()


def test_card_of_a_prompts_file_run(made, bench, standin, run, tmp_path):
    """`bench --prompts FILE --json R` (one cell, prompt_tokens 0, responses ending at EOS, acceptance
    intervals) passes the card's check, and the card shows that cell, the prompts and the intervals."""
    draft, files, card = made
    a = standin("--accept-pattern", "1", "--eos-after", "9")
    b = standin("--accept-pattern", "2,1,3,0", "--eos-after", "9")
    prompts, out = write_prompts(tmp_path / "prompts.jsonl", PROMPTS), tmp_path / "r.json"
    r = bench("--arm", "bf16=" + a, "--arm", "w4a16=" + b, "--prompts", prompts, "--warmup", "1",
              "--max-tokens", "21", "--json", str(out))
    assert r.returncode == 0, r.stderr
    res = json.loads(out.read_text())
    new = card.parent / "prompts.md"
    r = run("card", draft, "--bench", out, "-o", new)
    assert r.returncode == 0, r.stderr
    text = new.read_text()
    assert "concurrency 1, responses that end at EOS or at the most tokens allowed)" in text
    assert "a fixed output length" not in text
    part = section(text, "### Machine 1:")
    assert "Prompts: " + res["prompts"]["description"] + "." in part
    [row] = table_rows(part, "prompts file")
    cell = res["arms"][0]["cells"][0]
    assert cell["prompt_tokens"] == 0 and row[1].startswith(f"{cell['mean_tok_s']:.1f}")
    s = res["arms"][1]["spec_decode"]
    [spec_row] = table_rows(part, "w4a16")[:1]
    assert spec_row[4] == "%.3f [%.3f, %.3f]" % (s["mean_acceptance_length"],
                                                 s["mean_acceptance_length_ci_low"],
                                                 s["mean_acceptance_length_ci_high"])
    assert spec_row[5].startswith("%.3f [%.3f, %.3f]" % (s["per_position_rates"][0],
                                                          s["per_position_ci_low"][0],
                                                          s["per_position_ci_high"][0]))
    assert "[low, high]: 95% t interval over the ABBA blocks" in part
    svg = ET.parse(card.parent / "bench-1.svg").getroot()
    assert len([e for e in svg.iter() if e.tag.endswith("rect") and e.get("class") == "bar"]) == 2


# A field of the checkpoint's own "sparkulator" record (config.json) of the wrong type, and the end
# of the error it must give after "CKPT/config.json: ".
MALFORMED_RECORD = {
    "group_size_string": ("group_size", "x", "sparkulator.group_size: expected a number, got a string"),
    "data_free_string": ("data_free", "yes", "sparkulator.data_free: expected a boolean, got a string"),
    "kept_dense_reason_number": (
        "kept_dense", [{"tensor": "t", "reason": 3}],
        "sparkulator.kept_dense[0].reason: expected a string, got a number"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED_RECORD))
def test_malformed_record_is_an_input_error_naming_the_field(made, run, case):
    """A record field of the wrong type exits 2 naming config.json and the field, never exit 70
    ("internal error", nlohmann's type_error)."""
    draft, files, card = made
    key, value, message = MALFORMED_RECORD[case]
    config = json.loads((draft / "config.json").read_text())
    config["sparkulator"][key] = value
    (draft / "config.json").write_text(json.dumps(config))
    r = run("card", draft, "-o", card.parent / "new.md")
    assert r.returncode == 2, (r.returncode, r.stderr)
    errors = [line for line in r.stderr.splitlines() if "error" in line]
    assert errors == [f"sparkulator: error: {draft}/config.json: {message}"], r.stderr
    assert not (card.parent / "new.md").exists()


def scheme_names(run):
    """Every row of the scheme table, as `sparkulator quantize --help` lists them under --scheme
    (generated from the table: a row's name and summary, then a line with its group sizes)."""
    r = run("quantize", "--help")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    names = [lines[i].split()[0] for i in range(len(lines) - 1)
             if "group sizes" in lines[i + 1] and "group sizes" not in lines[i] and lines[i].strip()]
    assert "w4a16" in names and len(names) == len(set(names)) and len(names) >= 10, r.stdout
    return names


def number_tag(weights):
    """The number type a card must tag, from the checkpoint's own quantization_config weights."""
    bits = weights["num_bits"]
    if weights["type"] == "int":
        return f"int{bits}"
    if weights.get("scale_dtype") == "torch.uint8":
        return f"mxfp{bits}"  # E8M0 exponents
    return "nvfp4" if bits == 4 else f"fp{bits}"


def test_every_scheme_card_names_its_format_number_type_and_kernels(tmp_path, run):
    """The card of every scheme row, judged against the checkpoint's own quantization_config: the
    compressed-tensors format, the weights' width and number type (words and tags), and kernels of
    that number type only (no "fast W4A16 kernels" for an FP8, NVFP4, W8A8 or 3-bit checkpoint)."""
    src = tmp_path / "src"
    assert run("example", src, "--family", "dflash").returncode == 0
    number_tags = {f"int{b}" for b in range(2, 9)} | {"fp8", "fp4", "nvfp4", "mxfp4", "mxfp8"}
    failures = []
    for scheme in scheme_names(run):
        draft = tmp_path / scheme
        r = run("quantize", src, draft, "--scheme", scheme, *layout_flags(scheme))
        assert r.returncode == 0, (scheme, r.stderr)
        r = run("card", draft, "--base-model", "org/draft")
        assert r.returncode == 0, (scheme, r.stderr)
        text = r.stdout
        qc = json.loads((draft / "config.json").read_text())["quantization_config"]
        [group] = qc["config_groups"].values()
        w, fmt, bits = group["weights"], qc["format"], group["weights"]["num_bits"]
        intro = re.search(r"`org/draft`: (.*?)\. It is written in the compressed-tensors `([^`]*)` "
                          r"format that vLLM loads on (.*?), made with sparkulator", text, re.S)
        if intro is None:
            failures.append(f"{scheme}: no description sentence")
            continue
        words, named_format, kernels = intro.groups()
        tags = set(front_matter(text)["tags"])
        problems = []
        if named_format != fmt:
            problems.append(f"format `{named_format}`, config.json says {fmt}")
        if scheme not in tags or tags & number_tags != {number_tag(w)}:
            problems.append(f"tags {sorted(tags)}, expected {scheme} and {number_tag(w)}")
        if w["type"] == "int":
            if f"{bits}-bit integer" not in words and f"int{bits}" not in words:
                problems.append(f"words {words!r} do not say int{bits}")
            if re.search(r"(?i)fp4|mxfp|nvfp", words + kernels):
                problems.append(f"an int{bits} card names FP4/MX/NV kernels: {kernels!r}")
        else:
            if f"FP{bits}" not in words:
                problems.append(f"words {words!r} do not say FP{bits}")
            if f"fp{bits}" not in kernels.lower():
                problems.append(f"kernels {kernels!r} are not FP{bits} kernels")
            if re.search(r"\bint\d|W\dA16 kernels|WNA16|Machete", kernels):
                problems.append(f"a float card names integer kernels: {kernels!r}")
        # Marlin/Machete's fast WNA16 kernels: int4 (zero points or not) and symmetric int8 only.
        claims = set(re.findall(r"W(\d)A16 kernels", text))
        fast = fmt == "pack-quantized" and (bits == 4 or (bits == 8 and w["symmetric"]))
        if claims != ({str(bits)} if fast else set()):
            problems.append(f"claims W{sorted(claims)}A16 kernels")
        if fmt == "pack-quantized" and bits not in (4, 8) and "HummingLinearKernel" not in kernels:
            problems.append(f"a {bits}-bit card does not say only Humming runs it: {kernels!r}")
        failures += [f"{scheme}: {p}" for p in problems]
    assert not failures, "\n".join(failures)


def test_w4a16_card_words_are_unchanged(made):
    """The W4A16 description, byte for byte as before the card took its words from the scheme row."""
    text = made[2].read_text()
    assert ("`org/draft`: 4-bit integer weights (groups of 128, one BF16 scale each), 16-bit "
            "activations. It is written in the compressed-tensors `pack-quantized` format that vLLM "
            "loads on its fast W4A16 kernels, made with sparkulator ") in text
