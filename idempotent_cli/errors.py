"""The errors of the tools: what went wrong, in words an operator can act on."""

from __future__ import annotations


class DlqError(RuntimeError):
    """The command cannot do what was asked (unknown stack, no credentials, a queue that is not there...).

    The message names what was wrong and, where there is one, what to do instead. Raised before anything is
    changed, or after the command has put back everything it held (nothing is lost on an error path).
    """

    exit_code = 1


class Ambiguous(DlqError):
    """The operator must choose: a name that names several functions, or a command that changes something on
    a stack of several pipelines without --function. The message names the choices."""

    exit_code = 2
