"""Exceptions that several modules raise or catch: bad input, and training gone wrong."""


def first_line(error: BaseException) -> str:
    """An exception's message cut to its first line (its type's name when it has none), for
    errors reported in one line."""
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def named(error: BaseException) -> str:
    """`Type: first line`, for errors raised by the user's own code."""
    text = first_line(error)
    return (
        type(error).__name__ if text == type(error).__name__ else f"{type(error).__name__}: {text}"
    )


class UsageError(Exception):
    """Bad input from the user: the console commands print it as one line and exit with 2."""


class TrainingDiverged(Exception):
    """Too many updates in a row had a non-finite loss or gradient."""


class TrainingFailed(Exception):
    """A child process died, or a node lost the others; training stopped."""
