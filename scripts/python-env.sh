# Sourced by scripts/install-deps.sh and scripts/test.sh: which Python interpreter the test suites use.
#   SPK_PYTHON=/path/to/python   an interpreter of your own (a venv's or pyenv's), used as it is;
#   otherwise                    the project's virtual environment .venv, made by install-deps.sh.
# Debian 12's own python3 is never installed into: it is externally managed (PEP 668).
SPK_VENV="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.venv"
SPK_PY="${SPK_PYTHON:-$SPK_VENV/bin/python}"
