"""The layer dynamics of a task subset, measured in a worker thread while mteb scores the task.

Once a subset's last expected text is encoded (:attr:`LRDSample.expected` distinct texts seen),
nothing the layer dynamics read changes any more, so they are measured in a worker thread while
mteb goes on scoring the subset: numpy, FAISS and torch release the GIL, so the two overlap on
separate cores. The per-layer scores start once the measurement is in (their reads and the layer
dynamics' working set share one memory budget). The result is used only if the subset saw no further
text before its augmentation; otherwise (an expectation that was too small) it is dropped and the
measurement runs again in the foreground, as it does when the background one needed texts encoded
again (the worker never runs the model). Either way the numbers are the same.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

from mteb_lrd.metrics.lrd import LRDResult
from mteb_lrd.metrics.params import MetricParams
from mteb_lrd.storage.lrd_sample import LRDSample, SampleDraw

__all__ = ["BackgroundDynamics"]

Measurement = tuple[SampleDraw, LRDResult | None]


class BackgroundDynamics:
    """At most one background measurement at a time, for the wrapper's current subset."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._future: Future[Measurement] | None = None
        self._texts = -1

    def start(self, sample: LRDSample, params: MetricParams) -> None:
        """Measure ``sample`` in the worker thread (no-op while a measurement is pending)."""
        if self._future is not None:
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mteb-lrd-dynamics")
        self._texts = len(sample)
        self._future = self._pool.submit(sample.measure, params, None)

    @property
    def pending(self) -> bool:
        """Whether a measurement was started and not yet cleared."""
        return self._future is not None

    def wait(self) -> None:
        """Block until the pending measurement (if any) is finished; its errors surface in :meth:`result`."""
        if self._future is not None:
            self._future.exception()

    def result(self, texts: int) -> Measurement | None:
        """The background measurement when it saw ``texts`` distinct texts, else ``None``.

        Raises:
            whatever the measurement raised (a bad input is reported as in the foreground).
        """
        if self._future is None or self._texts != texts:
            self.wait()
            return None
        return self._future.result()

    def clear(self) -> None:
        """Wait for and forget the pending measurement (the stores it reads are about to be cleared)."""
        self.wait()
        self._future = None
        self._texts = -1
