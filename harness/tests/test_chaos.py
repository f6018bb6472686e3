"""Chaos: a smoke sweep whose runner is SIGKILLed at seeded random moments, restarted at once each
time, then resumed to the end: every cell exactly once, each with its wall time, and never two
workers on one cell at once nor a worker outliving its runner (watched in the process table).

Half the kills fall at a random moment of the sweep (Hydra's start-up, the sweep check, a cell,
between cells), half at a random moment of a running worker, so every run kills some mid-cell.
n_iter=30 makes a cell last seconds: a worker that outlived its runner would be seen for that long.
From the first kill on, a second sweep of the same cells (in the reverse order) runs on the same
results folder, unharmed: it must wait for every cell the other holds."""
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

import psutil

from harness.cell import CellSpec
from harness.results import read_csv, read_record
from harness.tests.conftest import REPO

SEED = 18
KILLS = 4
DIES_WITHIN_S = 1.0  # a worker of a killed runner is gone this soon (it takes < 0.1 s; its cell lasts seconds)
ARMS, SHAPES = ["pytorch", "sklearn"], ["tiny_7_5", "tiny_3_33"]  # CPU arms of the smoke sweep, its tiny shapes


class WorkerWatch(threading.Thread):
    """Polls the process table for this sweep's workers: which cell each runs, under which parent."""

    def __init__(self, marker: str):
        super().__init__(daemon=True)
        self.marker, self.stop = marker, threading.Event()
        self.workers: dict[int, tuple[int, str]] = {}  # alive now: pid -> (parent pid, cell)
        self.overlaps: list[tuple[str, set]] = []  # (cell, worker pids) seen alive together
        self.last_seen: dict[int, float] = {}  # worker pid -> when last seen alive
        self.cells_seen: set[str] = set()

    def run(self):
        while not self.stop.is_set():
            workers = {}
            for p in psutil.process_iter(["pid", "ppid", "cmdline"]):
                cmd = p.info["cmdline"] or []  # a zombie has none
                if len(cmd) == 4 and cmd[1:3] == ["-m", "harness.worker"] and self.marker in cmd[3]:
                    workers[p.info["pid"]] = (p.info["ppid"], CellSpec.from_dict(json.loads(cmd[3])["spec"]).key)
                    self.last_seen[p.info["pid"]] = time.time()
            by_cell = {}
            for pid, (_, key) in workers.items():
                by_cell.setdefault(key, set()).add(pid)
            self.workers = workers
            self.cells_seen |= set(by_cell)
            self.overlaps += [(k, pids) for k, pids in by_cell.items() if len(pids) > 1]
            time.sleep(0.05)

    def workers_of(self, runner: int) -> list[int]:
        return [pid for pid, (parent, _) in self.workers.items() if parent == runner]


def test_a_sweep_killed_at_random_moments_ends_with_every_cell_once(tmp_path):
    results = tmp_path / "results"
    common = ["n_iter=30", f"results_dir={results}", "device_label=testdev", f"hydra.sweep.dir={tmp_path / 'hydra'}"]
    cmd = [sys.executable, "-m", "harness", "-m", "experiment=smoke", f"arm={','.join(ARMS)}",
           f"shape={','.join(SHAPES)}", *common]
    reverse = [sys.executable, "-m", "harness", "-m", "experiment=smoke", f"arm={','.join(ARMS[::-1])}",
               f"shape={','.join(SHAPES[::-1])}", *common]
    watch = WorkerWatch(str(results))
    watch.start()
    rng = random.Random(SEED)
    killed = []  # (time of the kill, workers of the killed runner)
    concurrent = None
    try:
        for i in range(KILLS):
            runner = subprocess.Popen(cmd, cwd=REPO, start_new_session=True,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if i % 2 == 0:  # mid-cell: once one of its workers runs (the first kill has no rival sweep yet)
                while not watch.workers_of(runner.pid) and runner.poll() is None:
                    time.sleep(0.02)
                time.sleep(rng.uniform(0.2, 1.5))
            else:
                time.sleep(rng.uniform(0.5, 8.0))
            victims = watch.workers_of(runner.pid)
            if runner.poll() is None:  # a late runner may find every cell done (by the rival) and exit first
                os.kill(runner.pid, signal.SIGKILL)  # and at once the next sweep starts; poll() has not reaped it
                killed.append((time.time(), victims))
            runner.wait(30)
            if concurrent is None:
                concurrent = subprocess.Popen(reverse, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                              text=True)
        _, err = concurrent.communicate(timeout=240)
        final = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=240)
    finally:
        watch.stop.set()
        watch.join(5)
    assert concurrent.returncode == 0 and final.returncode == 0, (err + final.stderr)[-3000:]

    exp = results / "testdev" / "smoke"
    records = {p.stem: read_record(p)[0] for p in (exp / "cells").glob("*.json")}
    assert sorted((r["arm"], r["shape"]) for r in records.values()) == sorted((a, s) for a in ARMS for s in SHAPES)
    assert all(r["status"] == "ok" and r["wall_s"] > 0 and r["cell"] == k for k, r in records.items())
    rows = read_csv(exp.with_suffix(".csv"))
    assert sorted(r["cell"] for r in rows) == sorted(records)  # every cell exactly once
    assert not watch.overlaps, f"two workers ran one cell at once: {watch.overlaps}"
    assert killed and killed[0][1]  # the first kill was mid-cell
    lingered = {pid: round(watch.last_seen[pid] - t, 2) for t, victims in killed for pid in victims
                if watch.last_seen[pid] - t > DIES_WITHIN_S}
    assert not lingered, f"workers outlived their runner by (s): {lingered}"
    assert watch.cells_seen <= set(records)  # the watch saw the sweep's workers (and only its cells)
    assert not list((exp / "cells").glob(".run-*")) and not (exp / "cells" / "quarantine").exists()
