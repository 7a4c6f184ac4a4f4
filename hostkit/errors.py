"""The small exception tree of hostkit and the exit codes of every command (docs/contracts.md).

A failed play or a failed check is a *status* in a result object, never an
exception; these exceptions are for input the tool cannot act on and for
guards that refuse to act.
"""

EXIT_OK = 0
EXIT_FAILED = 1  # a check, host or SLO failed
EXIT_BAD_INPUT = 2  # bad input: nothing was changed
EXIT_REFUSED = 3  # refused by a safety guard


class HostkitError(Exception):
    """Base of every error hostkit raises on purpose."""

    exit_code = EXIT_FAILED


class BadInput(HostkitError):
    """Input hostkit cannot act on (a path, a file's content, an option)."""

    exit_code = EXIT_BAD_INPUT


class FactsError(BadInput):
    """A sysroot that is missing, incomplete, or holds malformed text."""


class CpulistError(BadInput, ValueError):
    """A kernel cpulist or CPU mask that does not parse."""


class Refused(HostkitError):
    """A safety guard refused the operation."""

    exit_code = EXIT_REFUSED


class LabError(HostkitError):
    """The SSH lab could not be started, reached or stopped."""
