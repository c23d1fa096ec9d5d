"""The machine's rates of a local model's engine (one ``timed_on_cpu``: llama.cpp's), as the run's jobs will get
them: measured on the run's own server, kept per load in the user's cache, and replaced by what a finished run's jobs
achieved.

llama-bench names the two rates: pp512, 512 prompt tokens read in one evaluation, and tg128, tokens written one at a
time at no context. The entry's engine measures them through the server a job starts (``Engine.measure_rates``, as
the best of a few short trials), with the cores other processes keep busy read just before. The cache
(``rates_cache_file``) holds records per setting (``rates_key``: the CPU and what the engine says its rates depend
on): the machine's rates, measured or learned from a whole run, and those each kind of job ran at in a finished run,
each with when it was made and under what load. A record is used where the load now is within ``LOAD_TOLERANCE``
cores of its own (and, where the threads waiting to run are known, past the cores there are, about as many wait as
then: ``CROWD_TOLERANCE``); a finished run replaces one whose rates put its jobs' time more than ``DISAGREEMENT``
off.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from h2htalk.commands import command
from h2htalk.hardware import available_cores, cpu_name, one_core_share
from h2htalk.io import write_json_atomic
from h2htalk.llm.engines import engine_of

MACHINE = "machine"  # a record of the machine's rates, for any job kind without its own
LOAD_TOLERANCE = 0.5  # cores: records made at loads this close are of the same state of the machine
DISAGREEMENT = 0.25  # a record whose rates put a finished run's time further off than this is replaced
KEPT_PER_KIND = 4  # records of one kind at different loads; the oldest go first
# where the threads waiting to run are known, records whose share of a core for a one-thread job differs by more than
# this factor are of different states of the machine, though the busy cores read the same ("2.0 of 2" at 4 and at 38)
CROWD_TOLERANCE = 1.5


@dataclass(frozen=True)
class Record:
    kind: str  # MACHINE, or the job kind (a stage's name, or "other jobs") whose jobs ran at these rates
    pp512: float
    tg128: float
    load: float | None  # cores other processes kept busy when it was made (None: not known on this system)
    cores: int  # the cores the jobs could use
    made: str  # ISO 8601, UTC
    source: str  # "measured" (on the run's server, best of its trials) or "run" (a finished run's jobs)
    runnable: float | None = None  # threads of other processes waiting to run when it was made (None: not known)

    def near(self, load: float | None, runnable: float | None = None) -> bool:
        if self.runnable is not None and runnable is not None:
            shares = one_core_share(self.runnable, None, self.cores), one_core_share(runnable, None, self.cores)
            if max(shares) > CROWD_TOLERANCE * min(shares):
                return False
        return self.load is None or load is None or abs(self.load - load) <= LOAD_TOLERANCE

    def describe(self) -> str:
        when = self.made[:16].replace("T", " ")
        load = "load unknown" if self.load is None else f"other processes using {self.load:.1f} of {self.cores} cores"
        how = "measured" if self.source == "measured" else "a finished run's jobs"
        waiting = "" if self.runnable is None else f", {self.runnable:.1f} threads of theirs ready to run"
        return f"{self.kind}: pp512 {self.pp512:.0f}, tg128 {self.tg128:.1f} ({how}, {when} UTC, {load}{waiting})"


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def rates_cache_file() -> Path:
    """Where rates are kept between runs: the user's cache folder (``XDG_CACHE_HOME``)."""
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "h2htalk" / "llamacpp_rates.json"


def rates_key(spec: dict[str, Any], model_file: str | os.PathLike[str] | None = None) -> str:
    """What the rates depend on: the CPU, and what the entry's engine says they depend on besides (llama.cpp's: the
    server's threads, flash attention, context and spin count, the model, its version; ``Engine.rates_setting``)."""
    return f"{cpu_name()} | {engine_of(spec).rates_setting(spec, model_file)}"


def read_cache(path: Path) -> dict[str, list[Record]]:
    """The cache's records per setting; an unreadable file, or one of an older layout, holds none."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    found: dict[str, list[Record]] = {}
    for key, records in data.items() if isinstance(data, dict) else ():
        try:  # an earlier layout (one dict per key, measured in-process with libgomp's default spin) is dropped
            found[key] = [Record(**record) for record in records]
        except TypeError:
            continue
    return found


def write_cache(path: Path, cache: dict[str, list[Record]]) -> None:
    write_json_atomic(path, {key: [asdict(r) for r in records] for key, records in cache.items()})


def reset_cache(path: Path) -> bool:
    """Forget every record; False where there was no cache."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True


def kept_rates(path: Path, reset: bool = False) -> list[str]:
    """What the cache at ``path`` keeps, each setting's records by kind (``h2htalk rates``); with ``reset``, it
    forgets them all, and says so."""
    if reset:
        return [f"{path}: removed" if reset_cache(path) else f"{path}: no rates kept"]
    cache = read_cache(path)
    lines = [f"{path}: " + (f"rates of {len(cache)} settings" if cache else "no rates kept")]
    for key, records in cache.items():
        lines += [f"\n{key}", *(f"  {r.describe()}" for r in sorted(records, key=lambda r: (r.kind, r.made)))]
    return lines


@command("rates")
def show_rates(reset: bool = False) -> list[str]:
    """Show the llama.cpp rates kept for the time a run says before it starts (measured, or learned from runs).

    They are kept in the user's cache folder (``rates_cache_file``).

    reset: forget them all: the next run measures anew
    """
    return kept_rates(rates_cache_file(), reset)


def nearest(records: Iterable[Record], kind: str, load: float | None, runnable: float | None = None) -> Record | None:
    """The record of ``kind`` made at the load closest to ``load``, within ``LOAD_TOLERANCE`` (and as crowded as
    ``runnable`` threads waiting to run make it, within ``CROWD_TOLERANCE``); the newest of equals."""
    near = [r for r in records if r.kind == kind and r.near(load, runnable)]
    distance = lambda r: 0.0 if r.load is None or load is None else abs(r.load - load)  # noqa: E731
    return min(near, key=lambda r: (distance(r), -datetime.fromisoformat(r.made).timestamp()), default=None)


def keep(records: list[Record], new: Record) -> list[Record]:
    """``new`` in place of the record of its kind it is nearest to in load (if any is near), the oldest of its kind
    dropped beyond ``KEPT_PER_KIND``."""
    replaced = nearest(records, new.kind, new.load, new.runnable)
    kept = [r for r in records if r is not replaced] + [new]
    same = sorted((r for r in kept if r.kind == new.kind), key=lambda r: r.made)
    too_old = set(map(id, same[: max(len(same) - KEPT_PER_KIND, 0)]))
    return [r for r in kept if id(r) not in too_old]


def learn(
    records: list[Record],
    found: Record,
    predicted_s: Callable[[Record], float],
    actual_s: float,
    used: Record | None = None,
) -> tuple[list[Record], str]:
    """Keep what a finished run's jobs of one kind achieved (``found``, made at the run's load): the record the run's
    estimate used for that kind (``used``, where it is one of ``records``), else the one of that kind nearest in load,
    stays where its rates put the run's time (``predicted_s``) within ``DISAGREEMENT`` of ``actual_s``; one further
    off is replaced, though it was made at another load (a moment's load the run did not keep to); where there is
    none, ``found`` is added. Returns the records and what happened: "kept", "replaced" or "added"."""
    before = used if used is not None and used.kind == found.kind and used in records else None
    before = before or nearest(records, found.kind, found.load, found.runnable)
    if before is None:
        return keep(records, found), "added"
    if abs(predicted_s(before) / actual_s - 1) <= DISAGREEMENT:
        return records, "kept"
    return keep([r for r in records if r != before], found), "replaced"


def server_rates(
    spec: dict[str, Any], model_file: str | os.PathLike[str], log_path: Path | None = None
) -> tuple[float, float, int]:
    """pp512 and tg128 of ``spec`` on the server a job of it starts, as its engine measures them. Returns (pp512,
    tg128, trials)."""
    return engine_of(spec).measure_rates(spec, model_file, log_path)


def measured(pp512: float, tg128: float, load: float | None, runnable: float | None = None) -> Record:
    return Record(
        MACHINE,
        round(pp512, 1),
        round(tg128, 1),
        _round(load),
        available_cores(),
        now_iso(),
        "measured",
        _round(runnable),
    )


def _round(load: float | None) -> float | None:
    return None if load is None else round(load, 2)


def from_run(kind: str, pp512: float, tg128: float, load: float | None, runnable: float | None = None) -> Record:
    return Record(
        kind, round(pp512, 1), round(tg128, 2), _round(load), available_cores(), now_iso(), "run", _round(runnable)
    )


def scaled(record: Record, factor: float) -> Record:
    return replace(record, pp512=record.pp512 * factor, tg128=record.tg128 * factor)
