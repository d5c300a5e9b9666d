"""Exceptions that several modules raise or catch: bad input, and training gone wrong."""


class UsageError(Exception):
    """Bad input from the user: the console commands print it as one line and exit with 2."""


class TrainingDiverged(Exception):
    """Too many updates in a row had a non-finite loss or gradient."""


class TrainingFailed(Exception):
    """A child process died, or a node lost the others; training stopped."""
