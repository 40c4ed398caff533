"""CUDA graphs: capture a sequence of drvgemm calls once, replay it with one
driver call.

    with drvgemm.graph() as g:          # or drvgemm.graph(stream)
        drvgemm.launch(k, grid, block, (x, n))
        drvgemm.gemm(a, b, c)           # device arrays
    g.replay()                          # on g.stream; g.synchronize() to wait
    g.close()                           # or let it be garbage-collected

The capture rule: inside the ``with`` block, on the thread that opened it,
``stream=None`` means the graph's stream (``g.stream``), so drvgemm calls
made with no stream, or with ``stream=g.stream``, are captured. A call given
another stream is not captured: it runs on that stream as usual. Other
threads are unaffected. ``drvgemm.graph(None)`` creates a non-blocking stream
for the graph; a stream you pass must not be the legacy default stream
(``0``), which cannot be captured.

What cannot be captured is refused with a clear error: host (numpy)
operands (a graph cannot move host data; pass device arrays), and
synchronising calls. Capture mode is "relaxed", so allocations may happen
inside the block (``gemm(a, b)`` allocating its C): every DeviceArray
allocated during the capture is kept alive by the graph, since replays write
to the addresses baked in. Kernel arguments are captured by value, once: a
replay reruns the launches with the same pointers and scalars.
"""
from __future__ import annotations

from . import driver, launch as _launch
from .errors import StaleObjectError

__all__ = ["Graph", "graph"]


class Graph:
    """A captured sequence of work and its executable instance."""

    def __init__(self, stream=None):
        self._own_stream = stream is None
        self.stream = driver.Stream() if stream is None else stream
        self.handle = driver.stream_handle(self.stream)
        if self.handle == 0:
            raise ValueError("the legacy default stream (0) cannot be captured; pass a "
                             "drvgemm.Stream (or None: the graph makes its own)")
        self.keep = []          # allocations made during capture; see module doc
        self._graph = None
        self._exec = None
        self._state = "new"     # new -> capturing -> ready -> closed (or stale)
        self.generation = driver.generation()
        self.nodes = 0
        driver.register_handle(self)

    # -- capture ------------------------------------------------------------------
    def __enter__(self):
        if self._state != "new":
            raise RuntimeError(f"a drvgemm graph captures once (this one is {self._state})")
        if driver.capturing_graph() is not None:
            raise RuntimeError("drvgemm.graph() blocks do not nest")
        driver.begin_capture(self.handle)
        self._state = "capturing"
        driver.push_capture(self)
        _launch.capture_begun()
        return self

    def __exit__(self, exc_type, exc, tb):
        driver.pop_capture(self)
        _launch.capture_ended()
        try:
            g = driver.end_capture(self.handle)
        except Exception:
            self._state = "closed"
            if exc_type is None:
                raise
            return False      # the error inside the block is the one to see
        if exc_type is not None:
            driver.destroy_graph(g)
            self._state = "closed"
            return False
        self._graph = g
        self.nodes = driver.graph_node_count(g)
        self._exec = driver.instantiate_graph(g)
        self._state = "ready"
        return False

    # -- replay -------------------------------------------------------------------
    def replay(self, stream=None):
        """Launch the instantiated graph on ``stream`` (default: the graph's
        own), asynchronously."""
        self._ready()
        handle = self.handle if stream is None else driver.stream_handle(stream)
        driver.launch_graph(self._exec, handle)

    def synchronize(self):
        """Wait for the graph's stream."""
        self._ready()
        driver.stream_synchronize(self.handle)

    def _ready(self):
        if self._state == "stale":
            raise StaleObjectError(
                f"this graph was captured before drvgemm.reset() (generation "
                f"{self.generation}, now {driver.generation()}); capture it again")
        if self._state != "ready":
            raise RuntimeError(f"the graph is {self._state}: capture it with "
                               "`with drvgemm.graph() as g: ...` before replaying")

    # -- lifetime -----------------------------------------------------------------
    def _invalidate(self):
        # reset(): the graph's handles died with the old context.
        self._graph = self._exec = None
        self.keep = []
        if self._state != "closed":
            self._state = "stale"

    def close(self):
        """Destroy the graph (waiting for its stream first) and, when the
        graph made it, its stream."""
        if self._state in ("ready", "capturing") and self._exec is not None:
            try:
                self.synchronize()
            finally:
                driver.destroy_graph(self._graph, self._exec)
        self._graph = self._exec = None
        if self._state != "stale":
            self._state = "closed"
        if self._own_stream and isinstance(self.stream, driver.Stream):
            self.stream.close()
        self.keep = []

    def __del__(self):
        try:
            if self._state == "ready":
                self.close()
        except Exception:
            pass

    def __repr__(self):
        return f"<drvgemm graph {self._state}, {self.nodes} nodes, stream 0x{self.handle:x}>"


def graph(stream=None) -> Graph:
    """A graph to capture into with ``with drvgemm.graph(stream) as g:``;
    see the module docstring for what is captured."""
    return Graph(stream)
