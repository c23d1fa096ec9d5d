"""What this process may run on."""

from __future__ import annotations

import os


def available_cores() -> int:
    """Cores this process may use: its CPU affinity (a SLURM job's allocation), not the machine's count."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
