"""`python -m tests.e2e smoke|full --work DIR [--cache DIR]`: the real-vLLM e2e (run.py).

Runs under the vLLM virtual environment's python; started with another python it creates the
environment when missing (env.ensure_venv) and re-executes itself there. Exit: 0 every assertion held,
1 one failed (DIR/summary.json lists them), 2 setup error, 4 vLLM could not be installed.
"""

import argparse
import os
import pathlib
import sys
import tempfile


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.e2e", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["smoke", "full"],
                    help="smoke: CI-sized (one kind, short bench, one broken copy); full: everything")
    ap.add_argument("--work", type=pathlib.Path,
                    help="working folder: summary.json, logs/, models/ (default: a new temp folder)")
    ap.add_argument("--cache", type=pathlib.Path,
                    help="trained-model cache (default $SPK_E2E_CACHE, else ~/.cache/sparkulator/e2e)")
    a = ap.parse_args()
    from tests.e2e import env
    try:
        import vllm  # noqa: F401
    except ImportError:
        try:
            py = env.ensure_venv()
        except env.VenvUnavailable as e:
            print(e, file=sys.stderr)
            return 4
        os.execv(str(py), [str(py), "-m", "tests.e2e"] + sys.argv[1:])
    work = a.work or pathlib.Path(tempfile.mkdtemp(prefix="e2e-vllm-cpu."))
    work.mkdir(parents=True, exist_ok=True)
    from tests.e2e import run, server
    server.install_exit_handlers()
    return run.main(work.resolve(), a.mode == "smoke", a.cache)


if __name__ == "__main__":
    sys.exit(main())
