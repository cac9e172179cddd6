"""The one error type every entry point turns into a single line (`cli.exit_code`), and the
argument parser whose mistakes are that error."""

import argparse


class UserError(Exception):
    """Bad user input: printed as one line naming the problem and the fix, exit code 2."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse for every command line here: a bad flag is one UserError line, not usage + error."""

    def error(self, message: str):
        raise UserError(f"{message} (see --help)")
