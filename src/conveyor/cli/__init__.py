"""The ``conveyor`` command line: one entry point, a subcommand group per part."""
