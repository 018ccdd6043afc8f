"""``python -m converge.cli``: the same as the ``converge`` console script."""

from converge.cli import main

main()
