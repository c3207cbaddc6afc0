"""``python -m rlplex.cli``."""

from rlplex.cli import main

main()
