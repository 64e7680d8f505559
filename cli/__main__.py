"""``python -m squall.cli``: the ``squall`` command."""

from .main import main

main()
