"""What reading the threads waiting to run costs, and what it reads beside busy processes at nice 0 and at nice 19.

    python benchmarks/runnable_reading.py [--busy 4] [--repeats 200]

``h2htalk.hardware.runnable_weight`` reads the state and nice of every thread of the machine
(``/proc/[pid]/task/[tid]/stat``) where ``/proc/stat``'s ``procs_running`` says another than the one reading is
ready to run; the estimate before a run takes ten readings over half a second (``runnable_others``). Per situation
(the machine as it is; ``--busy`` busy processes beside it at nice 19; as many at nice 0): the weighted reading,
``procs_running`` less the one reading (the count it replaces), the threads scanned, and one reading's CPU time
(mean of ``--repeats``) and wall time (median: a reader at nice 19 beside busy processes at nice 0 waits for a core
far longer than it reads). Busy processes at nice 0 need the right to lower a nice value where this runs
niced; without it they run at its own. Nothing is asserted; docs/performance.md quotes the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import time

from h2htalk.hardware import procs_running, runnable_weight


def busy(count: int, nice: int) -> list[subprocess.Popen[bytes]]:
    spinners = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(count)]
    for spinner in spinners:
        with contextlib.suppress(PermissionError):
            os.setpriority(os.PRIO_PROCESS, spinner.pid, nice)
    time.sleep(0.2)
    return spinners


def threads() -> int:
    return sum(
        len(os.listdir(f"/proc/{p}/task"))
        for p in os.listdir("/proc")
        if p.isdigit() and os.path.isdir(f"/proc/{p}/task")
    )


def situation(name: str, repeats: int) -> None:
    costs, walls, weights, counts = [], [], [], []
    for _ in range(repeats):
        cpu, wall = time.process_time(), time.perf_counter()
        weights.append(runnable_weight())
        costs.append(time.process_time() - cpu)
        walls.append(time.perf_counter() - wall)
        counts.append(procs_running() - 1)
    print(
        f"| {name} | {statistics.fmean(weights):.2f} | {statistics.fmean(counts):.2f} | {threads()}"
        f" | {1000 * statistics.fmean(costs):.2f} | {1000 * statistics.median(walls):.2f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--busy", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    print(f"this process at nice {os.getpriority(os.PRIO_PROCESS, 0)}, {os.cpu_count()} CPUs")
    print(
        "| situation | weighted threads waiting | procs_running - 1 | threads | CPU ms a reading | wall ms (median) |"
    )
    print("|---|--:|--:|--:|--:|--:|")
    situation("as it is", args.repeats)
    for nice in (19, 0):
        spinners = busy(args.busy, nice)
        try:
            nices = sorted({os.getpriority(os.PRIO_PROCESS, s.pid) for s in spinners})
            situation(f"{args.busy} busy at nice {', '.join(map(str, nices))}", args.repeats)
        finally:
            for spinner in spinners:
                spinner.kill()
                spinner.wait()


if __name__ == "__main__":
    main()
