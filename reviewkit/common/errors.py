"""The one exception hierarchy: every user-facing failure is a ReviewkitError."""


class ReviewkitError(Exception):
    """A failure the user can act on; the CLI prints its message and exits non-zero."""

    exit_code = 1


class UsageError(ReviewkitError):
    """A bad argument or option: an unknown profile, dtype, device or pattern."""

    exit_code = 2


class DeviceUnavailableError(ReviewkitError):
    """The requested device is not present on this machine."""

    exit_code = 2


class InputError(ReviewkitError):
    """An input file that cannot be used: malformed, incomplete, of the wrong type, or outside."""

    exit_code = 2


class BundleError(InputError):
    """A run bundle that cannot be read: missing, malformed or of another schema version."""


class OutputError(ReviewkitError):
    """An output that could not be written (a full disk, a read-only folder, permissions): the
    previous output is left as it was."""
