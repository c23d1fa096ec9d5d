"""h2htalk: a reproducible re-implementation of the H2HTalk benchmark study."""

__version__ = "0.1.0"
