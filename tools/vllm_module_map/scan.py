"""The model's own source and names: files, stacked_params_mapping, `.weight` reads, checkpoint names.

Reads the model files of vLLM's tree (parsed and tokenized once per file, cached), and maps module
paths to checkpoint names with the model's WeightsMappers. Called by build.Builder.describe.

Error policy: a model file that cannot be read, parsed or tokenized is skipped (it contributes no
stacked_params_mapping entries and no `.weight` reads); everything else propagates to the caller,
which records it as the entry's error.
"""
from __future__ import annotations

import ast
import functools
import inspect
import io
import os
import pathlib

def rel_file(obj) -> str | None:
    try:
        f = inspect.getsourcefile(obj)
    except TypeError:
        return None
    if f is None:
        return None
    f = f.replace(os.sep, "/")
    i = f.rfind("/vllm/")
    return f[i + 1:] if i >= 0 else f


def rel_file_path(f: str) -> str:
    f = f.replace(os.sep, "/")
    i = f.rfind("/vllm/")
    return f[i + 1:] if i >= 0 else f



@functools.lru_cache(maxsize=None)
def parsed(path: pathlib.Path):
    """A file's AST (each model file is read by many architectures: parsed once)."""
    return ast.parse(path.read_text())

def parsed_files(files: list[str], root: pathlib.Path):
    """(file, its parsed tree) for each of `files` (under `root`) that reads and parses; the others
    are skipped (a file this release does not have)."""
    for f in files:
        try:
            yield f, parsed(root / f)
        except (OSError, SyntaxError):
            continue


@functools.lru_cache(maxsize=None)
def tokens(path: pathlib.Path):
    """A file's code tokens (no strings' insides, comments or layout) and its lines."""
    import tokenize
    text = path.read_text()
    toks = [t for t in tokenize.generate_tokens(io.StringIO(text).readline)
            if t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT,
                              tokenize.INDENT, tokenize.DEDENT)]
    return toks, text.splitlines()


def checkpoint_renames(files: list[str], root: pathlib.Path) -> dict:
    """The checkpoint-name edits of the functions a model's load_weights passes its weights
    through (`load_weights(f(weights))`: MiniMax-M3 DSpark's _rename_checkpoint_weights,
    Nemotron 3.5 Transcribe's _mtp_weights), each undone: {"prefixes": the strings
    `name.removeprefix(P)` or `name[len(P):]` strips (P a literal or a module-level string
    constant), "inserted": the name parts `name.replace(".<part>.", ".")` drops, "rewrites":
    the regex rewrites of the functions it hands the weights or each name to (name_rewrites;
    a function imported from another model file read there)}. A checkpoint name is the
    module's name with each prefix put back and each part put back after the layer number, or
    a rewrite undone (load_probe.renamed)."""
    prefixes: list[str] = []
    inserted: list[str] = []
    trees = []
    for f in files:
        try:
            trees.append(parsed(root / f))
        except (OSError, SyntaxError):
            continue
    # The functions load_weights hands the weights to (by name), other than load_weights.
    filters = {c.func.id if isinstance(c.func, ast.Name) else c.func.attr
               for tree in trees for fn in ast.walk(tree)
               if isinstance(fn, ast.FunctionDef) and fn.name == "load_weights"
               for c in ast.walk(fn) if isinstance(c, ast.Call)
               and isinstance(c.func, (ast.Name, ast.Attribute))
               and any(isinstance(a, ast.Name) and a.id == "weights" for a in c.args)}
    filters.discard("load_weights")
    # The functions it hands each name to (`self._remap_dspark_name(name)`): only their regex
    # rewrites are read (name_rewrites), so a plain edit there changes no other model's names.
    name_filters = filters | {c.func.id if isinstance(c.func, ast.Name) else c.func.attr
                              for tree in trees for fn in ast.walk(tree)
                              if isinstance(fn, ast.FunctionDef) and fn.name == "load_weights"
                              for c in ast.walk(fn) if isinstance(c, ast.Call)
                              and isinstance(c.func, (ast.Name, ast.Attribute))
                              and any(isinstance(a, ast.Name) and a.id == "name"
                                      for a in c.args)}
    # A filter imported from another model's file (DeepSeek-V4.1 DSpark's
    # _duplicate_context_wkv_weights, defined beside V4's) is read there.
    imported = [rel for tree in trees for n in ast.walk(tree)
                if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("vllm.") and
                any(a.name in name_filters for a in n.names)
                and (rel := n.module.replace(".", "/") + ".py") not in files]
    rewrites: list[list] = []
    for f in files + sorted(set(imported)):
        try:
            tree = parsed(root / f)
        except (OSError, SyntaxError):
            continue
        consts = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign)
                  for t in n.targets if isinstance(t, ast.Name)
                  and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)}

        def value(node):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                return node.value
            return consts.get(node.id) if isinstance(node, ast.Name) else None
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef) and fn.name in name_filters:
                rewrites += [r for r in name_rewrites(fn, tree, value) if r not in rewrites]
            if not isinstance(fn, ast.FunctionDef) or fn.name not in filters:
                continue
            for call in ast.walk(fn):
                # name[len("llm."):]
                if isinstance(call, ast.Slice) and isinstance(call.lower, ast.Call) and \
                        isinstance(call.lower.func, ast.Name) and call.lower.func.id == "len" \
                        and call.lower.args and value(call.lower.args[0]) and \
                        value(call.lower.args[0]) not in prefixes:
                    prefixes.append(value(call.lower.args[0]))
                if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
                    continue
                args = [value(a) for a in call.args]
                if call.func.attr == "removeprefix" and args and args[0] and \
                        args[0] not in prefixes:
                    prefixes.append(args[0])
                if call.func.attr == "replace" and len(args) == 2 and args[1] == "." and \
                        args[0] and args[0].startswith(".") and args[0].endswith(".") and \
                        args[0].count(".") == 2 and args[0].strip(".") not in inserted:
                    inserted.append(args[0].strip("."))
    return {"prefixes": prefixes, "inserted": inserted, "rewrites": rewrites}


def name_rewrites(fn: ast.FunctionDef, tree: ast.Module, value) -> list[list]:
    """The regex rewrites of names in `fn`: [pattern, template] for each f-string built from the
    groups of one `re.match(P, ...)` / `re.fullmatch(P, ...)` / `R.match(...)` (R a module-level
    `re.compile(P)`), the template a list of literal strings and group numbers (DeepSeek-V4
    DSpark's `mtp\\.(\\d+)\\.(.*)` -> f"model.layers.{stage}.{rest}": ["model.layers.", 1, ".", 2]).
    `value`: a node's string value (a literal or a module-level string constant), or None."""
    compiled = {t.id: value(n.value.args[0]) for n in tree.body if isinstance(n, ast.Assign)
                and isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Attribute)
                and n.value.func.attr == "compile" and n.value.args
                for t in n.targets if isinstance(t, ast.Name)}

    def pattern_of(call) -> str | None:
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and
                call.func.attr in ("match", "fullmatch") and
                isinstance(call.func.value, ast.Name)):
            return None
        if call.func.value.id == "re":
            return value(call.args[0]) if call.args else None
        return compiled.get(call.func.value.id)

    def group_of(node) -> tuple[str, int] | None:
        """(match variable, group number) of a `m.group(k)` call."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr == "group" and isinstance(node.func.value, ast.Name) and \
                len(node.args) == 1 and isinstance(node.args[0], ast.Constant) and \
                isinstance(node.args[0].value, int):
            return node.func.value.id, node.args[0].value
        return None
    matches: dict[str, str] = {}
    groups: dict[str, tuple[str, int]] = {}  # `stage = int(m.group(1))`
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name):
            if (p := pattern_of(node.value)) is not None:
                matches[node.targets[0].id] = p
            found = [g for sub in ast.walk(node.value) if (g := group_of(sub))]
            if len(found) == 1:
                groups[node.targets[0].id] = found[0]
    out = []
    for node in ast.walk(fn):
        if not isinstance(node, ast.JoinedStr):
            continue
        template, of = [], set()
        for part in node.values:
            if isinstance(part, ast.Constant):
                template.append(part.value)
                continue
            g = group_of(part.value) or (groups.get(part.value.id)
                                         if isinstance(part.value, ast.Name) else None)
            if g is None or g[0] not in matches:
                break
            template.append(g[1])
            of.add(g[0])
        else:
            if len(of) == 1 and (r := [matches[of.pop()], template]) not in out:
                out.append(r)
    return out


def rename_dict_keys(files: list[str], root: pathlib.Path) -> list[str]:
    """The keys of the rename dicts in the files' load_weights functions: dict literals whose keys
    and values are all dotted string literals (LongCat MTP's new_to_old_names_mapping), the keys
    being checkpoint names with their parameter. load_probe.dense_only feeds them to the model's
    load_weights: they are names a checkpoint of the model holds, which no candidate of the
    module paths reaches (model.mtp.layers.0.eh_proj.weight)."""
    out: list[str] = []
    for f, tree in parsed_files(files, root):
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef) or fn.name != "load_weights":
                continue
            for d in ast.walk(fn):
                if not isinstance(d, ast.Dict) or not d.keys:
                    continue
                strings = [k.value for k in d.keys + d.values
                           if isinstance(k, ast.Constant) and isinstance(k.value, str)]
                if len(strings) != 2 * len(d.keys) or not all("." in s for s in strings):
                    continue
                out += [k.value for k in d.keys if k.value not in out]
    return out


def stacked_mappings(files: list[str], root: pathlib.Path) -> list[dict]:
    """(param, shard, shard_id) tuples assigned to *stacked_params_mapping* in the files' code."""
    out = []
    for f, tree in parsed_files(files, root):
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Assign, ast.AnnAssign)):
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id if isinstance(t, ast.Name) else getattr(t, "attr", "") for t in targets]
            if not any("stacked_params_mapping" in n for n in names):
                continue
            if not isinstance(node.value, ast.List):
                continue
            for e in node.value.elts:
                if isinstance(e, ast.Tuple) and len(e.elts) == 3 and \
                        all(isinstance(x, ast.Constant) for x in e.elts):
                    p, s, i = (x.value for x in e.elts)
                    out.append({"param": p, "shard": s, "shard_id": i, "file": f,
                                "line": e.lineno})
    return out


def stacked_entries(stacked: list[dict], path: str) -> list[dict]:
    """The stacked_params_mapping entries (stacked_mappings) that load into the module at
    `path`: those whose param is its last name part or its last parts (DeepSeek-V4's
    ("attn.fused_wqa_wkv", "attn.wq_a", 0)), each with its shard as a name beside the module
    ("wq_a")."""
    last = path.rsplit(".", 1)[-1]
    stem = path[: -len(last)]
    out = []
    for s in stacked:
        param = s["param"].strip(".")
        if not ("." + path).endswith("." + param):
            continue
        full = path[: -len(param)] + s["shard"].strip(".")
        if full.startswith(stem):
            out.append({**s, "shard": full[len(stem):]})
    return out


def checkpoint_names(path: str, last: str, shards: list[str] | None, entries: list[dict],
                     mappers: list, params: list[str]) -> dict:
    """The checkpoint module names that load into the module at `path`.

    Candidates: the path, and the path with its last part replaced by each shard of
    packed_modules_mapping (or of a stacked_params_mapping entry), each also without a leading
    "model.". A candidate is kept when one of the model's WeightsMappers (hf_to_vllm_mapper, vLLM's
    own name mapping) maps `<candidate>.<param>` to `<path>.<param>` ("hf_to_vllm_mapper", with the
    shard id it gives), or when a stacked_params_mapping entry of the model's files maps it
    ("stacked_params_mapping"); with neither, the path itself ("path", not verified)."""
    param = params[0] if params else "weight"
    stem = path[: -len(last)]
    parts = list(shards or []) + [s["shard"].strip(".") for s in entries]
    cands = []
    for base in ([] if shards else [path]) + [stem + p for p in parts]:
        for c in (base, base[len("model."):] if base.startswith("model.") else None):
            if c and c not in cands:
                cands.append(c)
    found, ids = [], {}
    for c in cands:
        for mp in mappers:
            r = mp._map_name_with_shard(f"{c}.{param}") if hasattr(mp, "_map_name_with_shard") \
                else (mp._map_name(f"{c}.{param}"), None)
            if r is not None and r[0] == f"{path}.{param}":
                if c not in found:
                    found.append(c)
                    if r[1] is not None:
                        ids[c] = r[1] if not isinstance(r[1], tuple) else list(r[1])
                break
    if found == [path]:
        return {"checkpoint_names": found, "checkpoint_names_source": "path (mappers keep it)",
                "checkpoint_shard_ids": None}
    if found:
        return {"checkpoint_names": found, "checkpoint_names_source": "hf_to_vllm_mapper",
                "checkpoint_shard_ids": {k: v for k, v in ids.items()} or None}
    if entries:
        names = []
        for s in entries:
            c = stem + s["shard"].strip(".")
            if c not in names:
                names.append(c)
        return {"checkpoint_names": names, "checkpoint_names_source": "stacked_params_mapping",
                "checkpoint_shard_ids": {stem + s["shard"].strip("."): s["shard_id"]
                                         for s in entries}}
    return {"checkpoint_names": [path], "checkpoint_names_source": "path",
            "checkpoint_shard_ids": None}


def weight_packed_renames(model, files: list[str], root: pathlib.Path) -> dict:
    """{"weight_packed_renamed": [...]} where a load_weights of the built `model`'s classes (in
    its `files`; not another class of those files, such as the target's) renames a
    checkpoint's `.weight_packed` to `.weight` (`name.replace(".weight_packed", ".weight")`), else
    {}: each with its file, line, code and "guard", the condition of the innermost `if` around it.
    Kimi-K3 MTP does so when its routed experts registered no w13_weight_packed (dense experts,
    or a MoE method that keeps them unpacked) and then skips every name no parameter has: each
    quantized Linear's weight_packed is dropped without a word."""
    classes = {c.__name__ for m in model.modules() for c in type(m).__mro__}
    out = []
    for f, tree in parsed_files(files, root):
        for fn in (fn for cls in ast.walk(tree) if isinstance(cls, ast.ClassDef)
                   and cls.name in classes for fn in cls.body
                   if isinstance(fn, ast.FunctionDef) and fn.name == "load_weights"):
            guards: dict[int, str] = {}  # id(call) -> the innermost if's condition
            for node in ast.walk(fn):  # outer ifs first: an inner one overwrites
                if isinstance(node, ast.If):
                    for sub in (n for b in node.body for n in ast.walk(b)):
                        guards[id(sub)] = ast.unparse(node.test)
            for call in (c for c in ast.walk(fn) if isinstance(c, ast.Call)):
                args = [a.value for a in call.args
                        if isinstance(a, ast.Constant) and isinstance(a.value, str)]
                if isinstance(call.func, ast.Attribute) and \
                        call.func.attr == "replace" and len(args) == 2 and \
                        args[0].endswith(".weight_packed") and "packed" not in args[1]:
                    out.append({"file": f, "line": call.lineno, "code": ast.unparse(call),
                                **({"guard": guards[id(call)]} if id(call) in guards else {})})
    return {"weight_packed_renamed": out} if out else {}


def weight_reads(files: list[str], root: pathlib.Path, linear_names: set[str]) -> list[dict]:
    """Code (tokens, so not strings or comments) reading `<name>.weight`, <name> a Linear's name."""
    import tokenize
    out = []
    for f in files:
        try:
            toks, lines = tokens(root / f)
        except (OSError, SyntaxError, tokenize.TokenError):
            continue
        for t0, t1, t2 in zip(toks, toks[1:], toks[2:]):
            if t0.type == tokenize.NAME and t0.string in linear_names and t1.string == "." \
                    and t2.type == tokenize.NAME and t2.string == "weight":
                n = t0.start[0]
                read = {"name": t0.string, "file": f, "line": n,
                        "code": lines[n - 1].split("#", 1)[0].strip()}
                if guard := dense_guard(root / f, n):
                    read["guard"] = guard
                out.append(read)
    return out


def tests_for_dense(test: str) -> bool:
    """Whether an `if` condition (ast.unparse'd) tests that a layer is dense before its branch reads
    `.weight`: 0.32's qwen3_dflash.py `if all(isinstance(..., UnquantizedLinearMethod) ...)`, or
    `hasattr(layer, 'weight')`."""
    return "UnquantizedLinearMethod" in test or ("hasattr(" in test and "'weight'" in test)


def dense_guard(path: pathlib.Path, line: int) -> str | None:
    """The condition of the innermost `if` (statement or expression) whose true branch holds
    `line` and whose condition tests that the layer is dense (tests_for_dense; or calls a
    function of the same file whose return value does, named with it), else None. A read in
    an `else` branch is not guarded."""
    try:
        tree = parsed(path)
    except (OSError, SyntaxError):
        return None
    found = None
    helpers = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            body = node.body
            start, end = body[0].lineno, max(getattr(b, "end_lineno", b.lineno) for b in body)
        elif isinstance(node, ast.IfExp):
            start, end = node.body.lineno, node.body.end_lineno
        else:
            continue
        test = ast.unparse(node.test)
        if start <= line <= end and not tests_for_dense(test):
            # A helper of the same file that tests it (0.34's qwen3_dflash.py
            # `if _reads_raw_weights(...)`): the guard names the helper's returns.
            for call in ast.walk(node.test):
                fn = helpers.get(call.func.id) if isinstance(call, ast.Call) and \
                    isinstance(call.func, ast.Name) else None
                returns = [ast.unparse(r.value) for r in ast.walk(fn) if
                           isinstance(r, ast.Return) and r.value is not None] if fn else []
                if any(tests_for_dense(r) for r in returns):
                    test = f"{test} ({call.func.id}: {'; '.join(returns)})"
                    break
        if start <= line <= end and tests_for_dense(test):
            if found is None or start >= found[0]:
                found = (start, test)
    return found[1] if found else None


def class_file(registry, root: pathlib.Path, arch: str) -> str | None:
    """The model file (relative to `root`) of `arch` in vLLM's model registry, or None."""
    info = registry._VLLM_MODELS.get(arch)
    if info is None:
        return None
    module, _ = info
    name = module if module.startswith("vllm.") else f"vllm.model_executor.models.{module}"
    base = root / name.replace(".", "/")
    for f in (base.with_suffix(".py"), base / "__init__.py"):
        if f.exists():
            return f.relative_to(root).as_posix()
    return None


def mapper_dict(mapper) -> dict | None:
    """The renames of a model class's hf_to_vllm_mapper (a WeightsMapper), each table as strings,
    for the map's "hf_to_vllm_mapper"; None without one."""
    if mapper is None:
        return None
    return {k: {str(a): str(b) for a, b in sorted((getattr(mapper, k) or {}).items())}
            for k in ("orig_to_new_prefix", "orig_to_new_substr", "orig_to_new_suffix",
                      "orig_to_new_stacked")
            if getattr(mapper, k, None)}
