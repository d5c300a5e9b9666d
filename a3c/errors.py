"""The one exception type that means "the user asked for something we cannot do"."""


class UsageError(Exception):
    """Bad input from the user: the console commands print it as one line and exit with 2."""
