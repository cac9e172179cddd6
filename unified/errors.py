"""The one error type every entry point turns into a single line (`cli.exit_code`), and the
argument parser whose mistakes are that error."""

import argparse


class UserError(Exception):
    """Bad user input: printed as one line naming the problem and the fix, exit code 2."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse for every command line here: a bad flag is one UserError line, not usage + error."""

    def error(self, message: str):
        raise UserError(f"{message} (see --help)")


def whole_number(flag: str, minimum: int | None = None):
    """An argparse `type=` for FLAG: a whole number (at least MINIMUM if given), else one
    UserError line with an example."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise UserError(f"{flag} needs a whole number, got {text!r}: e.g. {flag} {minimum or 2}") from None
        if minimum is not None and value < minimum:
            raise UserError(f"{flag} must be at least {minimum} (got {value})")
        return value

    return parse
