"""Installed package versions, for signatures and provenance."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def package_version(name: str, missing: str | None = "not-installed") -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return missing
