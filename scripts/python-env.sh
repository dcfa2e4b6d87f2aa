# Sourced by scripts/install-deps.sh and scripts/test.sh: which Python interpreter the test suites use.
#   SPK_PYTHON=/path/to/python   an interpreter of your own (a venv's or pyenv's), used as it is;
#   otherwise                    the project's virtual environment .venv, made by install-deps.sh.
# .venv is a link to a venv in the user's cache named by the hash of tests/requirements.txt
# ($SPK_CACHE, default ~/.cache/sparkulator: venv-HASH), so every clone on a machine shares one
# install of the same pins and a changed pin makes a new one. A .venv that is a real folder (made by
# hand, or by an older checkout) is used as it is.
# Debian 12's own python3 is never installed into: it is externally managed (PEP 668).
SPK_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SPK_CACHE="${SPK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sparkulator}"
SPK_VENV="$SPK_ROOT/.venv"
SPK_VENV_SHARED="$SPK_CACHE/venv-$(sha256sum "$SPK_ROOT/tests/requirements.txt" | cut -c1-12)"
SPK_PY="${SPK_PYTHON:-$SPK_VENV/bin/python}"
