"""Twenty raters at the review desk at once, over TLS on loopback, with the desk on one worker.

    python benchmarks/desk_load.py [--raters 20] [--ratings 50] [--flood 100] [--deadline 600]

The desk is `h2htalk desk-serve` as a rater's study would run it: its own process, one uvicorn worker, on
127.0.0.2 (tokens needed) with a self-signed certificate made by `openssl` for the run; each rater is a thread
with its own HTTPS client that trusts that certificate. The store holds ceil(raters x ratings / 3) gated
plans with Chinese text, each assigned to 3 raters, so every rater has at least `--ratings` of them.

1. Flood: `--flood` posts at once from nobody logged in, of 100 bytes (what as many TLS connections cost), then
   twice of 1 MB; the desk's memory (RSS, psutil) at its peak during each round and once its connections closed.
2. Load: every rater logs in with their token, then `--ratings` times asks for their next item (GET /next/gated,
   a redirect), opens it (GET /item/N) and rates it (POST /item/N); latency per request (p50, p95) of each
   kind, errors, the desk's peak RSS. Afterwards the
   store's log is counted: rows, ratings lost (acknowledged with 303 but not in the log), ratings stored twice.
3. Kill: the same load on a new store; once a third of the ratings are acknowledged the desk is killed with
   SIGKILL, started again, and the raters go on where they were (their sessions survive the restart). Every
   rating acknowledged before the kill must be in the log, and at the end every rater's ratings, once each.

Nothing is asserted; the figures go into docs/review_desk.md, with the machine they were measured on.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import math
import os
import re
import signal
import socket
import sqlite3
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

from h2htalk.desk_store.store import DeskItem, ReviewStore
from h2htalk.desk_store.tasks import GATED

HOST = "127.0.0.2"
LEVEL = {
    "level_name": "Level I：根据共同爱好和共同记忆写一天的概述",
    "format_rule": "一段以“今天，”开头、不分行的叙述，不超过约230字",
    "persona_rule": "是否以任务里的伴侣和用户为主角",
    "use_rule": "是否把给出的共同爱好自然地编进一天的活动",
}


def gated_item(number: int) -> DeskItem:
    """A gated plan with Chinese text of the size a real one has (about 1,500 characters shown)."""
    shown = {
        "rubric": "【评分细则】（0–5分，可以有一位小数）"
        + "任务格式、人物一致性、时间连贯与可行性、信息利用、温度。" * 8,
        "level": LEVEL,
        "system": "你是用户在虚拟世界里的伴侣。" * 20,
        "task": f"【任务】第{number}个任务：规划你们的一天，并写一段概述。" + "共同爱好：钢琴、烘焙、读书。" * 20,
        "answer": f"今天，遥斗和用户去了第{number}个地方散步，" + "一边聊天一边看晚霞。" * 15,
        "reference": "参考的一天。" * 10,
    }
    after = {
        "judge_scores": [2, 3, 3], "judge_mean": 8 / 3, "judge_evidence": "日程合理，但偏题。", "S": 40.0,
        "reasons": ["J5 < 3.5"],
    }  # fmt: skip
    return DeskItem(GATED, ("bench-model", "sap", "itinerary_basic", f"item-{number:05d}"), shown, after)


@dataclass
class Desk:
    """A desk-serve process over one store, started and killed as the run needs."""

    root: Path
    config: Path
    port: int
    certificate: Path
    key: Path
    process: subprocess.Popen | None = None

    @property
    def base(self) -> str:
        return f"https://{HOST}:{self.port}"

    def start(self, trusted: ssl.SSLContext) -> None:
        command = [
            sys.executable, "-m", "h2htalk", "desk-serve", "--config", str(self.config), "--host", HOST,
            "--port", str(self.port), "--certfile", str(self.certificate), "--keyfile", str(self.key),
        ]  # fmt: skip
        self.process = subprocess.Popen(command, cwd=self.root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(self.base + "/login", verify=trusted, timeout=2)
                return
            except httpx.TransportError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise SystemExit("the desk did not start") from None
                time.sleep(0.2)

    def rss_mb(self) -> float:
        assert self.process is not None
        return psutil.Process(self.process.pid).memory_info().rss / 2**20

    def settled_rss_mb(self) -> float:
        """RSS once the desk holds no connection but its listening socket (up to 30 s: a TLS connection closes
        once its peer's close_notify arrives)."""
        assert self.process is not None
        process, deadline = psutil.Process(self.process.pid), time.monotonic() + 30
        while len(process.net_connections()) > 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        return self.rss_mb()

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)


def make_desk(root: Path, raters: list[str], ratings: int) -> tuple[Desk, dict[str, str], ssl.SSLContext]:
    """A store with the items and each rater's token, a certificate for 127.0.0.2, and the desk's config."""
    store_path = root / "desk" / "ratings.sqlite"
    store_path.parent.mkdir(parents=True)
    per_item = min(3, len(raters))
    items = [gated_item(n) for n in range(math.ceil(len(raters) * ratings / per_item))]
    with ReviewStore(store_path, create=True) as store:
        store.load(items, raters, per_item, 0)
        tokens = {rater: store.new_token(rater) for rater in raters}
    config = root / "config.yaml"
    config.write_text(f"review:\n  store: {store_path}\n  raters: [{', '.join(raters)}]\n", encoding="utf-8")
    certificate, key = root / "desk.crt", root / "desk.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
         "-subj", "/CN=h2htalk desk benchmark", "-addext", f"subjectAltName=IP:{HOST}", "-keyout", str(key),
         "-out", str(certificate)],
        check=True, capture_output=True,
    )  # fmt: skip
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port = sock.getsockname()[1]
    return Desk(root, config, port, certificate, key), tokens, ssl.create_default_context(cafile=str(certificate))


@dataclass
class Tally:
    """What the raters saw: each request's latency by kind, errors, the ratings acknowledged."""

    latency: dict[str, list[float]] = field(default_factory=lambda: {"login": [], "next": [], "page": [], "rate": []})
    errors: Counter = field(default_factory=Counter)
    acknowledged: list[tuple[str, int]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def timed(self, kind: str, send: Callable[..., httpx.Response], *args: Any, **kwargs: Any) -> httpx.Response:
        started = time.perf_counter()
        answer = send(*args, **kwargs)
        with self.lock:
            self.latency[kind].append(time.perf_counter() - started)
        return answer


FORM_VALUE = re.compile(r'name="(csrf|item_hash)" value="([^"]+)"')


class Rater:
    """One rater's browser: logs in once, then opens and rates their next item until they have rated enough."""

    def __init__(self, name: str, token: str, desk: Desk, trusted: ssl.SSLContext, tally: Tally) -> None:
        self.name, self.token, self.desk, self.tally = name, token, desk, tally
        self.client = httpx.Client(base_url=desk.base, verify=trusted, timeout=60)
        self.rated = 0
        self.logged_in = False

    def log_in(self) -> None:
        self.client.get("/login")
        data = {"csrf": self.client.cookies["desk_login"], "rater": self.name, "token": self.token}
        answer = self.tally.timed("login", self.client.post, "/login", data=data)
        if answer.status_code != 303:
            raise SystemExit(f"{self.name} could not log in: {answer.status_code}")
        self.logged_in = True

    def rate(self, wanted: int, stop: threading.Event) -> None:
        """Rate until ``wanted`` ratings are acknowledged, ``stop`` is set, or the desk is gone."""
        try:
            if not self.logged_in:
                self.log_in()
            while self.rated < wanted and not stop.is_set():
                where = self.tally.timed("next", self.client.get, f"/next/{GATED}").headers.get("location", "")
                if not where.startswith("/item/"):
                    return  # every item of theirs is rated (one sent just before a kill was stored)
                page = self.tally.timed("page", self.client.get, where)
                item = int(where.removeprefix("/item/"))
                form = dict(FORM_VALUE.findall(page.text))
                score = f"{(item * 7 + len(self.name)) % 51 / 10:.1f}"
                sent = {**form, "rater": self.name, "human_score": score}
                answer = self.tally.timed("rate", self.client.post, f"/item/{item}", data=sent)
                if answer.status_code == 303:
                    with self.tally.lock:
                        self.tally.acknowledged.append((self.name, item))
                    self.rated += 1
                else:
                    self.tally.errors[f"rate {answer.status_code}"] += 1
        except httpx.TransportError as exc:
            with self.tally.lock:
                self.tally.errors[type(exc).__name__] += 1


def run_raters(raters: list[Rater], wanted: int, deadline: float, stop: threading.Event) -> None:
    threads = [threading.Thread(target=r.rate, args=(wanted, stop)) for r in raters]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(1.0, deadline - time.monotonic()))
    stop.set()
    for thread in threads:
        thread.join()


def close(raters: list[Rater]) -> None:
    for rater in raters:
        rater.client.close()


def watch_memory(desk: Desk, peak: list[float], stop: threading.Event) -> None:
    while not stop.is_set():
        with contextlib.suppress(psutil.NoSuchProcess):
            peak[0] = max(peak[0], desk.rss_mb())
        stop.wait(0.05)


def logged(desk: Desk) -> list[tuple[str, int]]:
    """(rater, item) of every row of the store's log."""
    store_path = desk.root / "desk" / "ratings.sqlite"
    with sqlite3.connect(f"file:{store_path}?mode=ro", uri=True) as db:
        return db.execute("SELECT rater, item FROM log ORDER BY id").fetchall()


def verify_chain(desk: Desk) -> str:
    """What ``h2htalk desk-verify`` says of the store once the load is over: the chain's head, or its first
    problem."""
    with ReviewStore(desk.root / "desk" / "ratings.sqlite") as store:
        found = store.verify()
    if found.problems:
        return "BROKEN: " + "; ".join(found.problems)
    return f"verified ({found.ratings} ratings, {found.items} items, head {found.head[:16]})"


def counted(desk: Desk, acknowledged: list[tuple[str, int]]) -> str:
    rows = logged(desk)
    lost, unacknowledged = set(acknowledged) - set(rows), set(rows) - set(acknowledged)
    twice = len(rows) - len(set(rows))
    return (
        f"{len(rows)} rows; {len(lost)} acknowledged ratings lost; {twice} stored twice; {len(unacknowledged)} "
        f"stored without an acknowledgement (sent as the desk was killed); chain: {verify_chain(desk)}"
    )


def percentiles(seconds: list[float]) -> str:
    if len(seconds) < 2:
        return f"{len(seconds)} requests"
    cuts = statistics.quantiles(seconds, n=20)
    return f"{len(seconds)} requests, p50 {cuts[9] * 1000:.0f} ms, p95 {cuts[18] * 1000:.0f} ms"


def report_load(tally: Tally, seconds: float, peak: float) -> None:
    for kind, values in tally.latency.items():
        print(f"  {kind}: {percentiles(values)}")
    print(f"  all: {percentiles(list(itertools.chain(*tally.latency.values())))}")
    print(f"  {len(tally.acknowledged)} ratings acknowledged in {seconds:.1f} s; errors: {dict(tally.errors) or 0}")
    print(f"  desk's peak RSS {peak:.0f} MB")


def flood(desk: Desk, trusted: ssl.SSLContext, posts: int) -> None:
    """Rounds of ``posts`` posts at once to an item's page from nobody logged in, of 100 bytes (what the
    connections alone cost), then twice of 1 MB: the desk's memory at its peak during each, and once its
    connections have closed."""
    lock = threading.Lock()

    def post(body: bytes, answers: Counter) -> None:
        with httpx.Client(base_url=desk.base, verify=trusted, timeout=60) as client:
            headers = {"Content-Type": "application/x-www-form-urlencoded"}
            try:
                answer = str(client.post("/item/1", content=body, headers=headers).status_code)
            except httpx.TransportError as exc:
                answer = type(exc).__name__  # the desk answered and closed before the body was sent
        with lock:
            answers[answer] += 1

    print(f"flood: {posts} posts at once from nobody logged in; the desk's RSS {desk.rss_mb():.0f} MB before")
    for size in (100, 2**20, 2**20):
        body, answers = b"human_score=3&pad=" + b"x" * (size - 18), Counter()
        stop, peak = threading.Event(), [desk.rss_mb()]
        watcher = threading.Thread(target=watch_memory, args=(desk, peak, stop))
        watcher.start()
        started = time.monotonic()
        threads = [threading.Thread(target=post, args=(body, answers)) for _ in range(posts)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        seconds = time.monotonic() - started
        stop.set()
        watcher.join()
        print(
            f"  {size:,} bytes each, {seconds:.1f} s: answers {dict(answers)}; RSS at the peak {peak[0]:.0f} MB, "
            f"{desk.settled_rss_mb():.0f} MB once its connections closed"
        )


def load(root: Path, names: list[str], ratings: int, deadline: float, flood_posts: int) -> None:
    desk, tokens, trusted = make_desk(root, names, ratings)
    desk.start(trusted)
    try:
        if flood_posts:
            flood(desk, trusted, flood_posts)
        tally, stop, peak = Tally(), threading.Event(), [desk.rss_mb()]
        watcher = threading.Thread(target=watch_memory, args=(desk, peak, stop))
        watcher.start()
        raters = [Rater(name, tokens[name], desk, trusted, tally) for name in names]
        started = time.monotonic()
        run_raters(raters, ratings, deadline, stop)
        seconds = time.monotonic() - started
        watcher.join()
        print(f"load: {len(names)} raters x {ratings} ratings, TLS, one worker")
        report_load(tally, seconds, peak[0])
        print(f"  store: {counted(desk, tally.acknowledged)}")
        close(raters)
    finally:
        desk.stop()


def kill_midway(root: Path, names: list[str], ratings: int, deadline: float) -> None:
    desk, tokens, trusted = make_desk(root, names, ratings)
    desk.start(trusted)
    tally = Tally()
    raters = [Rater(name, tokens[name], desk, trusted, tally) for name in names]
    try:
        stop = threading.Event()
        runner = threading.Thread(target=run_raters, args=(raters, ratings, deadline, stop))
        runner.start()
        third = len(names) * ratings // 3
        while len(tally.acknowledged) < third and runner.is_alive():
            time.sleep(0.005)
        desk.kill()
        with tally.lock:
            before_kill = list(tally.acknowledged)
        runner.join()
        kept = set(before_kill) <= set(logged(desk))
        print(f"kill: SIGKILL after {len(before_kill)} acknowledged ratings; errors then: {dict(tally.errors)}")
        print(f"  after the kill, before a restart: every acknowledged rating in the log: {kept}")
        desk.start(trusted)
        tally.errors.clear()
        run_raters(raters, ratings, deadline, threading.Event())  # the same browsers, their sessions kept
        print(f"  after the restart: raters went on; errors: {dict(tally.errors) or 0}")
        print(f"  store: {counted(desk, tally.acknowledged)}")
    finally:
        close(raters)
        desk.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--raters", type=int, default=20)
    parser.add_argument("--ratings", type=int, default=50, help="ratings per rater")
    parser.add_argument("--flood", type=int, default=100, help="unauthenticated 1 MB posts before the load")
    parser.add_argument("--deadline", type=float, default=600, help="seconds each load may run")
    args = parser.parse_args()
    names = [f"r{n:02d}" for n in range(1, args.raters + 1)]
    print(f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as folder:
        load(Path(folder) / "load", names, args.ratings, time.monotonic() + args.deadline, args.flood)
        kill_midway(Path(folder) / "kill", names, args.ratings, time.monotonic() + args.deadline)


if __name__ == "__main__":
    main()
