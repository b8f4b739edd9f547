"""Progress of long work: a tqdm bar on a terminal, log lines everywhere else.

A job whose output goes to a file shows no bars, and a stage of minutes would be silent.
:class:`Progress` draws the bar when asked to (``show=True``); otherwise it logs one line at most
every :data:`LOG_INTERVAL_S` seconds — done / total, rate and time left — through :mod:`logging`
(``mteb_lrd.progress`` logger, INFO), plus a last line when a stage that logged ends.
"""

from __future__ import annotations

import logging
import math
import sys
import time
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import Any, Generic, TypeVar

from tqdm.auto import tqdm

__all__ = ["LOG_INTERVAL_S", "Progress"]

logger = logging.getLogger(__name__)

LOG_INTERVAL_S = 30.0
"""Seconds between two progress log lines of one stage."""

T = TypeVar("T")


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "unknown"
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else (f"{minutes}m{secs:02d}s" if minutes else f"{secs}s")


class Progress(Generic[T]):
    """Counts the work of one stage: a bar when ``show``, else a log line every ``interval`` seconds.

    Args:
        iterable: items to go through (``for item in progress``), or ``None`` to count with :meth:`update`.
        total: the number of units (``len(iterable)`` when it has one).
        desc: what the stage does, first word of every line. unit: what is counted.
        show: draw a tqdm bar on stderr (a terminal, or ``--progress``) instead of logging.
        interval: seconds between log lines (default :data:`LOG_INTERVAL_S`).
    """

    def __init__(
        self,
        iterable: Iterable[T] | None = None,
        *,
        total: int | None = None,
        desc: str,
        unit: str = "it",
        show: bool = False,
        interval: float | None = None,
    ) -> None:
        if total is None and iterable is not None and hasattr(iterable, "__len__"):
            total = len(iterable)  # type: ignore[arg-type]
        self.iterable, self.total, self.desc, self.unit = iterable, total, desc, unit
        self.interval = LOG_INTERVAL_S if interval is None else interval
        self.n = 0
        self._bar: Any = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr) if show else None
        self._start = self._last = time.monotonic()
        self._logged = False

    def __iter__(self) -> Iterator[T]:
        if self.iterable is None:
            raise TypeError("Progress was made without an iterable: count with update()")
        try:
            for item in self.iterable:
                yield item
                self.update(1)
        finally:
            self.close()

    def update(self, n: int = 1) -> None:
        """``n`` more units done."""
        self.n += n
        if self._bar is not None:
            self._bar.update(n)
            return
        now = time.monotonic()
        if now - self._last >= self.interval:
            self._last = now
            self._log(now)

    def _log(self, now: float) -> None:
        elapsed = max(now - self._start, 1e-9)
        rate = self.n / elapsed
        if self.total:
            left = (self.total - self.n) / rate if rate > 0 else math.inf
            done = f"{self.n}/{self.total} {self.unit} ({100 * self.n / self.total:.0f} %)"
            tail = f", about {_duration(left)} left"
        else:
            done, tail = f"{self.n} {self.unit}", ""
        logger.info("%s: %s, %.3g %s/s%s", self.desc, done, rate, self.unit, tail)
        self._logged = True

    def write(self, line: str) -> None:
        """A line of output beside the progress: under the bar on stdout, else logged."""
        if self._bar is not None:
            self._bar.write(line, file=sys.stdout)
        else:
            logger.info("%s", line)

    def close(self) -> None:
        """End the stage: close the bar, or log a last line when the stage logged before."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self._logged:
            self._logged = False
            elapsed = time.monotonic() - self._start
            logger.info("%s: done, %d %s in %s", self.desc, self.n, self.unit, _duration(elapsed))

    def __enter__(self) -> Progress[T]:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()
