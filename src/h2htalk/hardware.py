"""The machine this process runs on, and what of it the process may use."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


def available_cores() -> int:
    """Cores this process may use: its CPU affinity (a SLURM job's allocation), not the machine's count."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


@dataclass(frozen=True)
class CpuSnapshot:
    """CPU time so far: every process's on this process's cores, and this process's own with its finished children."""

    at: float  # time.monotonic()
    busy_s: float | None  # None where /proc/stat cannot be read (not Linux)
    own_s: float


# /proc/stat's columns after the CPU's name: user nice system idle iowait irq softirq steal (guest time is in user);
# steal is time a virtual machine's neighbours took from this CPU, so it counts as another's
BUSY_COLUMNS = (0, 1, 2, 5, 6, 7)


def cpu_snapshot() -> CpuSnapshot:
    times = os.times()
    own = times.user + times.system + times.children_user + times.children_system
    return CpuSnapshot(time.monotonic(), _busy_seconds(), own)


def _busy_seconds() -> float | None:
    """CPU seconds spent busy on this process's cores since boot, by every process (``/proc/stat``)."""
    cores = {f"cpu{n}" for n in os.sched_getaffinity(0)} if hasattr(os, "sched_getaffinity") else None
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            rows = [line.split() for line in handle if line.startswith("cpu") and not line.startswith("cpu ")]
    except OSError:
        return None
    ticks = sum(int(row[1 + i]) for row in rows if cores is None or row[0] in cores for i in BUSY_COLUMNS)
    return ticks / os.sysconf("SC_CLK_TCK")


def other_processes_cores(before: CpuSnapshot, after: CpuSnapshot, own_running_s: float = 0.0) -> float | None:
    """Cores other processes kept busy between two snapshots, on average: the busy time of this process's cores less
    its own and its children's (``own_running_s``: CPU time of children not yet finished); None where unknown."""
    wall = after.at - before.at
    if before.busy_s is None or after.busy_s is None or wall <= 0:
        return None
    others = (after.busy_s - before.busy_s) - (after.own_s - before.own_s) - own_running_s
    return min(max(others / wall, 0.0), float(available_cores()))


def other_processes_load(seconds: float = 1.0) -> float | None:
    """Cores other processes keep busy now: measured over ``seconds`` while this process waits."""
    before = cpu_snapshot()
    time.sleep(seconds)
    return other_processes_cores(before, cpu_snapshot())


# the kernel's CFS weight of a thread by its nice value, -20 to 19 (kernel/sched/core.c, sched_prio_to_weight): the
# time a busy core gives each thread ready to run is in proportion to it
NICE_WEIGHTS = (
    88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916,
    9548, 7620, 6100, 4904, 3906, 3121, 2501, 1991, 1586, 1277,
    1024, 820, 655, 526, 423, 335, 272, 215, 172, 137,
    110, 87, 70, 56, 45, 36, 29, 23, 18, 15,
)  # fmt: skip


def nice_weight(nice: int) -> float:
    """A thread's claim on a core against a thread at nice 0 (the jobs'): 1 at nice 0, 15/1024 at 19."""
    return NICE_WEIGHTS[min(max(nice, -20), 19) + 20] / NICE_WEIGHTS[20]


def procs_running() -> int:
    with open("/proc/stat", encoding="ascii") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith("procs_running"))


def runnable_weight(pids: Iterable[int] | None = None) -> float:
    """The threads ready to run now (state R in ``/proc/[pid]/task/[tid]/stat``) on this process's cores, of the
    processes ``pids`` (default: every one but this), each counted by its nice's weight against nice 0's: a thread
    at nice 19 takes almost nothing from a job at nice 0, so it counts 15/1024 of one; one below nice 0 (a kernel
    worker at -20) counts as one, as it can take no more than a core. Raises OSError where ``/proc`` cannot be
    read."""
    cores = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    own = os.getpid()
    if pids is None:
        if procs_running() <= 1:  # only the thread reading: nothing to look for, a quiet machine reads in microseconds
            return 0.0
        pids = (int(entry.name) for entry in os.scandir("/proc") if entry.name.isdigit())
    weight = 0.0
    for pid in pids:
        if pid == own:
            continue
        try:
            tasks = [entry.name for entry in os.scandir(f"/proc/{pid}/task")]
        except OSError:  # the process ended
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/stat", "rb") as handle:
                    fields = handle.read().rsplit(b")", 1)[1].split()  # the name before ")" may hold spaces
            except (OSError, IndexError):
                continue
            # fields from the state on: state (3rd of the file), nice (19th), the CPU it is queued on (39th)
            if fields[0] == b"R" and (cores is None or int(fields[36]) in cores):
                weight += min(nice_weight(int(fields[16])), 1.0)
    return weight


def runnable_others(seconds: float = 0.5, readings: int = 10) -> float | None:
    """Threads of other processes ready to run on this process's cores, on average over ``seconds`` (``readings``
    of them, fewer where reading takes longer: a reader at nice 19 beside busy processes waits for a core), each
    counted by its claim on a core against a job at nice 0 (``runnable_weight``: a laptop's indexer at nice 19 counts
    15/1024 of one). Unlike the busy cores it is not capped at the cores there are: it tells a load of 4 from one of
    38. None where unknown."""
    weights: list[float] = []
    end = time.monotonic() + seconds
    while len(weights) < readings and (not weights or time.monotonic() < end):
        try:
            weights.append(runnable_weight())
        except (OSError, StopIteration):
            return None
        time.sleep(max(0.0, min(seconds / readings, end - time.monotonic())))
    return sum(weights) / len(weights)


def one_core_share(runnable: float | None, load: float | None, cores: int) -> float:
    """The share of one core a one-thread job can expect: the cores shared out among the threads ready to run, its own
    included; where the run queue is not known, the cores other processes keep busy stand for it."""
    others = runnable if runnable is not None else (load or 0.0)
    return min(1.0, cores / (others + 1.0))


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` says of it."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe_hardware() -> dict[str, Any]:
    """The machine, for provenance: CPU, cores (all and available), memory, GPUs, system, Python."""
    info: dict[str, Any] = {
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cpus": os.cpu_count(),
        "cpus_available": available_cores(),
        "system": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
    }
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        info["memory_gib"] = round(pages * size / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        info["memory_gib"] = None
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=20,
                check=True,
            ).stdout
            info["gpus"] = [line.strip() for line in out.splitlines() if line.strip()]
        except (OSError, subprocess.SubprocessError):
            info["gpus"] = None
    else:
        info["gpus"] = []
    return info
