"""The one error type users see: bad input, reported in one line with exit status 2."""


class InputError(Exception):
    """Bad input from the user (an unknown field, a malformed size, a missing file...).

    The message must name the input and say what to do; the CLI prints it on one line and
    exits with status 2.
    """
