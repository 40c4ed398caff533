"""Timing GPU work from Python: device events around each repetition,
warm-up first, the median of many repetitions, and L2 flushed between
repetitions so a kernel whose inputs fit in L2 is not timed on a warm cache."""
from __future__ import annotations

import statistics

from . import driver

_flush_buffer = None


@driver.on_reset
def _drop_flush_buffer():
    global _flush_buffer
    _flush_buffer = None     # its memory went with the old context


def flush_l2(stream=None):
    """Overwrite a buffer twice the size of L2, evicting everything else."""
    global _flush_buffer
    if _flush_buffer is None:
        size = max(2 * driver.device().l2_size, 8 << 20)
        _flush_buffer = driver.empty((size,), "uint8")
    _flush_buffer.fill_bytes(0x5A, stream)


def time_ms(fn, *, warmup=3, reps=20, flush_l2=True, stream=None) -> list[float]:
    """Run ``fn()`` (which enqueues GPU work on ``stream``) ``warmup`` times,
    then time ``reps`` runs, each between its own pair of events."""
    for _ in range(warmup):
        fn()
    driver.synchronize()
    events = [(driver.Event(), driver.Event()) for _ in range(reps)]
    for start, end in events:
        if flush_l2:
            globals()["flush_l2"](stream)
        start.record(stream)
        fn()
        end.record(stream)
    events[-1][1].synchronize()
    return [s.elapsed_ms(e) for s, e in events]


def median_ms(fn, *, warmup=3, reps=20, flush_l2=True, stream=None) -> float:
    return statistics.median(time_ms(fn, warmup=warmup, reps=reps, flush_l2=flush_l2,
                                     stream=stream))


def batch_median_ms(enqueue, batch, reps, sync=None) -> float:
    """Median over ``reps`` of the time of ``batch`` back-to-back ``enqueue()``
    calls between two events on the legacy default stream, divided by
    ``batch``; L2 is flushed before each batch. Back-to-back launches hide
    the launch gaps, as a library call in a real program would."""
    sync = sync or driver.synchronize
    enqueue()
    sync()
    times = []
    for _ in range(reps):
        globals()["flush_l2"]()
        start, end = driver.Event(), driver.Event()
        start.record()
        for _ in range(batch):
            enqueue()
        end.record()
        end.synchronize()
        times.append(start.elapsed_ms(end) / batch)
    sync()
    return statistics.median(times)
