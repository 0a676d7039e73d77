"""The errors users see, each printed on one line by the CLI.

InputError: bad input (an unknown field, a malformed size, a corrupt or missing file...), exit
status 2. ToolError: an external tool (Java/Anserini) failed on good input, exit status 1; its
message says where the tool's log was kept.
"""


class InputError(Exception):
    """Bad input from the user; the message must name the input and say what to do."""


class ToolError(Exception):
    """An external program failed; the message names its log file, which is kept."""
