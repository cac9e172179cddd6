"""The one error type every entry point turns into a single line (`cli.exit_code`)."""


class UserError(Exception):
    """Bad user input: printed as one line naming the problem and the fix, exit code 2."""
