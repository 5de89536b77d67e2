"""``python -m conveyor``: the command-line interface."""

from conveyor.cli.main import main

main()
