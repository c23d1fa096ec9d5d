"""Errors the command line reports as one clear message (no traceback)."""


class H2HTalkError(Exception):
    """Base class: a user-facing error with a message that names what is wrong."""


class ConfigError(H2HTalkError):
    """The configuration does not match the schema."""


class DataError(H2HTalkError):
    """Input data is missing, malformed or does not match what is expected."""
