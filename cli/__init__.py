"""The `kchaos` command line (cli/main.py), one module per kind of command."""
