#!/usr/bin/env python3
"""Checks that sparkulator's layers hold: no include, and no link, runs up the layer table.

The table below is the one place the order of the layers is written down. Each layer names the
layers directly below it; a layer may use those and, through them, everything below them (its
closure), never a layer above or beside it. The checker fails, naming file:line, on

- an ``#include "x/..."`` in src/, tools/ or python/src/ whose layer ``x`` is outside the including
  file's closure (tests, ``*_test.cc`` and ``*test_util.h``, may also use their row's ``tests`` layers);
- a ``DEPS spk_...`` of an ``spk_library()`` or ``spk_test()`` in src/*/CMakeLists.txt that links a
  layer outside the closure (the build puts only linked layers on a library's include path, so
  the two checks agree);
- an ``#include <filesystem>`` or ``#include <fstream>`` in a non-test file of src/ outside src/io/:
  every file goes through io/file.h's ``FileSystem``, so that the fault-injecting one reaches it
  (tests may keep them for their set-up);
- a folder of src/ that the table does not place, and a cycle in the table;
- docs/design.md's copy of the table (between ``<!-- layers:begin -->`` and ``<!-- layers:end -->``)
  differing from ``--markdown``'s output.

Usage: scripts/check-layers.py [--root DIR] [--markdown]
Exit status: 0 when the layers hold, 1 with one line per violation on stderr, 2 for bad usage.
Standard library only; ctest runs it as the test ``layers``.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Layer:
    name: str
    below: tuple[str, ...]  # the layers directly below it
    owns: str  # what it is for (docs/design.md's table)
    tests: tuple[str, ...] = ()  # more layers its tests may use (to build their fixtures)


# The layer table, bottom first. docs/design.md mirrors it (paste the output of --markdown).
LAYERS: tuple[Layer, ...] = (
    Layer("base", (), "`Status` / `Result<T>`, checked arithmetic, checked reads of user-supplied "
          "JSON (`json_at.h`), little-endian helpers, the worker pool, progress, the version "
          "(`version.h.in`, generated into the build folder)"),
    Layer("io", ("base",), "the `FileSystem` (leveldb's Env: pread, pwrite, whole files, copies, "
          "listings, folders, renames, removal, fsync; the only POSIX calls for checkpoint files, in "
          "`posix_file_system.cc`), the atomic output folder (temporary folder, fsync, rename), a "
          "fault-injecting file system for tests that fails any of those operations, and running a helper "
          "program to its end (`subprocess.h`)"),
    Layer("tensor", ("base",), "the dtype table, BF16/F16 conversions with round-to-nearest-even"),
    Layer("safetensors", ("io", "tensor"), "header parsing with the reference's rules, the writer "
          "with offsets computed up front, the shard index, reading a checkpoint folder "
          "(`checkpoint_files.h`) and writing one (`checkpoint_writer.h`: the `CheckpointWriter` "
          "every command that writes a checkpoint uses)"),
    Layer("quant", ("tensor",), "the scheme table (one row per `--scheme`) and its codecs, the scalar "
          "reference quantizer (RTN), packing, the scale search; `simd/`: Highway kernels "
          "(`*-inl.h`), each tested against the scalar reference"),
    Layer("model", ("safetensors", "quant"), "what a model folder says: `config.json` "
          "(`model_config.h`), its `quantization_config` (`quant_config.h`), the target's precision, "
          "a stored tensor (`tensor_meta.h`), the MoE rules (fused 3-D experts, routers), the NVFP4 "
          "global-scale sets and the names of a quantized module's tensors"),
    Layer("source", ("model",), "opening a source checkpoint (`source.h`: a folder or a Hugging "
          "Face cache id, fused experts expanded) and decoding every pre-quantized source format "
          "(`source_decode.h`: FP8 blocks, compressed-tensors, GPTQ/AWQ, ModelOpt), the "
          "quantized-module reader and the files copied as they are"),
    Layer("vllm", ("source",), "what a vLLM release does: its version grammar, the module maps and "
          "their rules, module patterns, the draft families and vLLM's naming of them, the kernel "
          "rules and GEMM judgement, the `vllm serve` line, the target model, and the one build "
          "decision (`vllm_build.h`) that the plan, check and inspect share"),
    Layer("plan", ("vllm",), "the plan (which tensor gets which scheme, and why) and the example "
          "checkpoints"),
    Layer("quantize", ("plan",), "the streaming quantizer that executes a plan"),
    Layer("dequantize", ("plan",), "a compressed-tensors checkpoint of any registry format "
          "back to a dense one",
          tests=("quantize",)),
    Layer("compare", ("dequantize", "plot"), "per-layer error of a quantized checkpoint against its "
          "source, the gain of a second one, their JSON/text/HTML reports"),
    Layer("inspect", ("quantize", "dequantize"), "what `inspect` and `quantize --json` report: the "
          "plan with its reasons, a quantized checkpoint's modules, sizes, the serving line"),
    Layer("check", ("plan",), "loadability and fidelity findings (`check`), the vLLM source "
          "scan", tests=("quantize",)),
    Layer("plot", ("base",), "SVG charts fitted to their data: magnitudes from 0, ratios as their "
          "change from 1, axes with units, legends (compare's HTML, bench's SVG, the card's chart)"),
    Layer("http", ("base",), "HTTP/SSE client and the Prometheus text parser"),
    Layer("bench", ("http", "plot", "io"), "arms, the ABBA schedule, server shapes (prompt cutting), memory "
          "per arm, statistics, reports"),
    Layer("card", ("check", "bench", "plot"), "`sparkulator card`: the model card of a quantized "
          "checkpoint from its `config.json` record, `check` and bench results"),
)
# tools/ (the CLI) sits above every layer; no layer includes it. python/src/ (the nanobind module of
# the Python package) sits above tools/: it calls the layers for the API and the CLI for the
# console script; neither tools/ nor a layer includes it.
TOP = "tools"
PYTHON = "python"

INCLUDE = re.compile(r'^\s*#\s*include\s+"([A-Za-z0-9_]+)/')
FILE_HEADER = re.compile(r"^\s*#\s*include\s+<(filesystem|fstream)>")
TEST_FILE = re.compile(r"(_test\.cc|test_util\.h)$")
CMAKE_CALL = re.compile(r"\b(spk_library|spk_test)\s*\(([^)]*)\)", re.S)
DOCS_BEGIN, DOCS_END = "<!-- layers:begin -->", "<!-- layers:end -->"


def closures(layers: tuple[Layer, ...]) -> dict[str, set[str]]:
    """Each layer's closure (itself and everything below it); ValueError on a cycle or an unknown name."""
    by_name = {layer.name: layer for layer in layers}
    done: dict[str, set[str]] = {}

    def visit(name: str, path: tuple[str, ...]) -> set[str]:
        if name in path:
            raise ValueError("cycle in the layer table: " + " -> ".join(path + (name,)))
        if name not in by_name:
            raise ValueError(f"layer '{path[-1]}' names '{name}', which is not in the table")
        if name not in done:
            result = {name}
            for lower in by_name[name].below:
                result |= visit(lower, path + (name,))
            done[name] = result
        return done[name]

    for layer in layers:
        visit(layer.name, ())
        for extra in layer.tests:
            visit(extra, (layer.name,))
    return done


def allowed_for(layer: str, is_test: bool, closure: dict[str, set[str]]) -> set[str]:
    """The layers a file of `layer` may use."""
    if layer == TOP:
        return set(closure)
    if layer == PYTHON:
        return set(closure) | {TOP}
    allowed = set(closure[layer])
    if is_test:
        for extra in next(x for x in LAYERS if x.name == layer).tests:
            allowed |= closure[extra]
    return allowed


def source_files(root: Path):
    """(path, layer) for every C/C++ file of src/, tools/ and python/src/."""
    for top, layer in (("src", None), (TOP, TOP), (f"{PYTHON}/src", PYTHON)):
        base = root / top
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            if path.suffix in (".h", ".cc", ".c", ".hpp", ".cpp") and path.is_file():
                rel = path.relative_to(root)
                yield path, layer or rel.parts[1]


def check_includes(root: Path, closure: dict[str, set[str]]) -> list[str]:
    known = set(closure) | {TOP, PYTHON}
    errors = []
    for path, layer in source_files(root):
        if layer not in known:
            continue  # reported once, by check_folders
        allowed = allowed_for(layer, bool(TEST_FILE.search(path.name)), closure)
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            match = INCLUDE.match(line)
            if not match or match.group(1) not in known:
                continue  # an outside library ("hwy/...") or a file of the same folder
            used = match.group(1)
            if used not in allowed:
                errors.append(
                    f"{path.relative_to(root)}:{number}: layer '{layer}' includes "
                    f'"{used}/...", which is not below it; '
                    f"'{layer}' may use: {', '.join(sorted(allowed - {layer})) or 'no other layer'}"
                )
    return errors


def check_file_access(root: Path) -> list[str]:
    """<filesystem> and <fstream> outside src/io/, in src/'s non-test files."""
    errors = []
    for path, layer in source_files(root):
        if path.relative_to(root).parts[0] != "src" or layer == "io" or TEST_FILE.search(path.name):
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            match = FILE_HEADER.match(line)
            if match:
                errors.append(
                    f"{path.relative_to(root)}:{number}: <{match.group(1)}> outside src/io/; read "
                    "and write files through the FileSystem of io/file.h (fault injection reaches "
                    "only what goes through it)"
                )
    return errors


def library_layers(root: Path) -> dict[str, str]:
    """spk_ library name -> the layer (src/ folder) that declares it."""
    owner = {}
    for cmake in sorted((root / "src").glob("*/**/CMakeLists.txt")):
        layer = cmake.relative_to(root / "src").parts[0]
        for match in CMAKE_CALL.finditer(cmake.read_text()):
            if match.group(1) == "spk_library":
                owner[match.group(2).split()[0]] = layer
    return owner


def check_links(root: Path, closure: dict[str, set[str]]) -> list[str]:
    owner = library_layers(root)
    errors = []
    for cmake in sorted((root / "src").glob("*/**/CMakeLists.txt")):
        layer = cmake.relative_to(root / "src").parts[0]
        if layer not in closure:
            continue
        text = cmake.read_text()
        for match in CMAKE_CALL.finditer(text):
            words = re.sub(r"#[^\n]*", "", match.group(2)).split()
            deps = words[words.index("DEPS") + 1 :] if "DEPS" in words else []
            allowed = allowed_for(layer, match.group(1) == "spk_test", closure)
            for dep in deps:
                if dep in owner and owner[dep] not in allowed:
                    at = re.search(rf"\bDEPS\b.*?\b{re.escape(dep)}\b", match.group(0), re.S)
                    number = text.count("\n", 0, match.start() + at.end()) + 1
                    errors.append(
                        f"{cmake.relative_to(root)}:{number}: {words[0]} (layer '{layer}') links "
                        f"{dep} of layer '{owner[dep]}', which is not below it"
                    )
    return errors


def check_folders(root: Path, closure: dict[str, set[str]]) -> list[str]:
    return [
        f"src/{folder.name}: a folder the layer table of scripts/check-layers.py does not place; "
        "add a row naming the layers below it"
        for folder in sorted((root / "src").iterdir())
        if folder.is_dir() and folder.name not in closure
    ]


def markdown() -> str:
    """The table as docs/design.md shows it."""
    rows = ["| layer | directly below it | what it owns |", "|---|---|---|"]
    for layer in LAYERS:
        below = ", ".join(f"`{b}`" for b in layer.below) or "-"
        if layer.tests:
            below += " (tests also: " + ", ".join(f"`{t}`" for t in layer.tests) + ")"
        rows.append(f"| `src/{layer.name}/` | {below} | {layer.owns} |")
    return "\n".join(rows)


def check_docs(root: Path) -> list[str]:
    docs = root / "docs" / "design.md"
    if not docs.is_file():
        return []
    text = docs.read_text()
    if DOCS_BEGIN not in text or DOCS_END not in text:
        return [f"docs/design.md:1: no {DOCS_BEGIN} ... {DOCS_END} block with the layer table"]
    start = text.index(DOCS_BEGIN) + len(DOCS_BEGIN)
    if text[start : text.index(DOCS_END)].strip() != markdown():
        number = text.count("\n", 0, start) + 1
        return [
            f"docs/design.md:{number}: the layer table differs from scripts/check-layers.py's; "
            "paste the output of scripts/check-layers.py --markdown"
        ]
    return []


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1],
                        help="the checkout to check (default: this script's)")
    parser.add_argument("--markdown", action="store_true",
                        help="print the layer table for docs/design.md and exit")
    args = parser.parse_args(argv)
    if args.markdown:
        print(markdown())
        return 0
    try:
        closure = closures(LAYERS)
    except ValueError as error:
        print(f"scripts/check-layers.py: {error}", file=sys.stderr)
        return 1
    root = args.root.resolve()
    errors = (check_folders(root, closure) + check_includes(root, closure)
              + check_file_access(root) + check_links(root, closure) + check_docs(root))
    for error in errors:
        print(error, file=sys.stderr)
    if errors:
        print(f"{len(errors)} layer violation(s); the table is in scripts/check-layers.py",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
