"""``python -m sparkulator ...``: the same as the ``sparkulator`` console script."""

from ._cli import main

main()
