"""The command line: the only place where flag names appear."""
