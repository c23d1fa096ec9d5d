"""Snakemake's logger plugin ``h2htalk`` (``--logger h2htalk``, set in the profiles): a short terminal.

Snakemake finds logger plugins by this package's name; the handler lives in ``h2htalk.workflow_log``.
"""

from h2htalk.workflow_log import LogHandler

__all__ = ["LogHandler"]
