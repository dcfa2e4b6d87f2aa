"""The ``sparkulator`` console script: the command line of the native core, in this process.

It runs the same code as the ``sparkulator`` binary (``tools/cli.cc``, through ``_core.main``), so
flags, output and exit codes are the binary's.
"""

from __future__ import annotations

import sys

from . import _core


def main() -> None:
    """Runs ``sparkulator`` with this process's arguments and exits with its exit code."""
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(_core.main(["sparkulator", *sys.argv[1:]]))
