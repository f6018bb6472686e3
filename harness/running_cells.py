"""The cells running on this host at once: what a row's ``concurrent_cells`` counts.

While its worker runs, every runner holds an exclusive ``flock`` on ``<registry>/<pid>-<uuid>.cell``
(the file is locked under a temporary name, renamed into place, and removed before it is unlocked,
so a ``.cell`` file is never seen unlocked while its cell runs). A thread of the runner counts the other ``.cell`` files whose lock it cannot take, when
the cell starts and every ``poll_s`` until it ends; the row records the most it saw (0: the cell ran
alone). A file whose lock can be taken was left by a runner that died, and is removed. The registry
is node-local (``running_cells_dir``, under ``$TMPDIR``), shared by every sweep of the host.
"""
from __future__ import annotations

import fcntl
import os
import threading
import uuid
from pathlib import Path


def others_running(registry: Path, own: Path | None = None) -> int:
    """How many cells other than ``own`` hold their registry lock now; removes dead runners' files."""
    count = 0
    for path in Path(registry).glob("*.cell"):
        if path == own:
            continue
        try:
            f = open(path)
        except FileNotFoundError:  # its cell just ended
            continue
        with f:
            try:
                fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                count += 1
                continue
            path.unlink(missing_ok=True)  # lockable: its runner died
    return count


class RunningCell:
    """``with RunningCell(registry) as cell: ...`` registers this process's cell for the block and
    samples the others; ``cell.most_others`` is the most other cells seen running at once."""

    def __init__(self, registry: str | Path, poll_s: float = 0.25):
        self.registry, self.poll_s = Path(registry), float(poll_s)
        self.most_others = 0
        self._stop = threading.Event()

    def __enter__(self) -> "RunningCell":
        self.registry.mkdir(parents=True, exist_ok=True)
        name = f"{os.getpid()}-{uuid.uuid4().hex}"
        self.path = self.registry / f"{name}.cell"
        tmp = self.registry / f".{name}.tmp"
        self._file = open(tmp, "w")
        fcntl.flock(self._file, fcntl.LOCK_EX)
        os.replace(tmp, self.path)
        self._sample()
        self._thread = threading.Thread(target=self._watch, name="running-cells", daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        self.most_others = max(self.most_others, others_running(self.registry, self.path))

    def _watch(self) -> None:
        while not self._stop.wait(self.poll_s):
            self._sample()

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()
        self.path.unlink(missing_ok=True)
        self._file.close()
