"""The `logbus` command. The entry point is `logbus.cli.main.main`; each subcommand lives
in its own module (`topics`, `produce`, `consume`, `server`) with a `register(subparsers)`
that sets the function to run."""
