"""``isolated(fn, *args, **kwargs)``: run an experiment in a child process
(multiprocessing, spawn start method: a fresh interpreter with its own CUDA
context) and return its result, or raise its error here. A kernel that
faults, hangs past ``timeout`` or kills its process takes only the child
with it; the caller's context, arrays and caches are untouched.

``fn``, its arguments and its result travel by pickle: ``fn`` must be a
module-level function (not a lambda or a closure) and the result a plain
value (numbers, numpy arrays, ...), not a DeviceArray, whose memory ends with
the child.
"""
from __future__ import annotations

import multiprocessing
import os
import pickle
import sys
import traceback

__all__ = ["isolated", "IsolatedError"]


class IsolatedError(RuntimeError):
    """The child died without a Python answer (killed, crashed, timed out),
    or its exception could not be sent back; ``child_traceback`` holds what
    is known."""

    def __init__(self, message, child_traceback=""):
        self.child_traceback = child_traceback
        super().__init__(message + (f"\n--- in the child ---\n{child_traceback.rstrip()}"
                                    if child_traceback else ""))


def _child(conn, fn, args, kwargs):
    try:
        result = fn(*args, **kwargs)
        payload = ("ok", result)
    except BaseException as e:  # noqa: BLE001 - everything goes back to the parent
        tb = traceback.format_exc()
        try:
            pickle.dumps(e)
            payload = ("error", (e, tb))
        except Exception:
            payload = ("unpicklable", (f"{type(e).__name__}: {e}", tb))
    try:
        conn.send(payload)
    except Exception as e:   # the result itself does not pickle
        conn.send(("unpicklable", (f"the result of {getattr(fn, '__name__', fn)!r} cannot be "
                                   f"sent back ({type(e).__name__}: {e})", "")))
    finally:
        conn.close()


def isolated(fn, *args, timeout: float | None = None, **kwargs):
    """``fn(*args, **kwargs)`` in a fresh child process; its return value,
    or its exception re-raised here (the child's traceback is attached as a
    note). IsolatedError when the child dies without answering or runs past
    ``timeout`` seconds (it is then killed)."""
    try:
        pickle.dumps(fn)
    except Exception as e:
        raise TypeError(f"isolated() runs {fn!r} in another process, so it must be picklable "
                        f"(a module-level function, not a lambda or closure): {e}") from None
    if getattr(fn, "__module__", None) == "__main__":
        # A spawned child finds __main__'s functions by running its file again:
        # a notebook, `python -c` or a script read from stdin has none, and the
        # child would die looking for the function.
        main_file = getattr(sys.modules.get("__main__"), "__file__", None)
        if not main_file or not os.path.exists(main_file):
            raise TypeError(f"isolated() runs {getattr(fn, '__name__', fn)!r} in a new process, "
                            "which imports it by its module; it was defined in an interactive "
                            "session (a notebook, python -c, a script on stdin), which a new "
                            "process cannot import: put it in a .py file and import it")
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, fn, args, kwargs), daemon=True)
    proc.start()
    child.close()
    try:
        if not parent.poll(timeout):
            proc.kill()
            proc.join()
            raise IsolatedError(f"{getattr(fn, '__name__', fn)!r} ran past {timeout} s in the "
                                "child process, which was killed")
        try:
            status, value = parent.recv()
        except EOFError:
            proc.join()
            raise IsolatedError(f"the child process running {getattr(fn, '__name__', fn)!r} "
                                f"died without an answer (exit code {proc.exitcode})") from None
    finally:
        parent.close()
    proc.join()
    if status == "ok":
        return value
    if status == "error":
        exc, tb = value
        if hasattr(exc, "add_note"):
            exc.add_note(f"raised in the child process of drvgemm.isolated:\n{tb.rstrip()}")
        raise exc
    message, tb = value
    raise IsolatedError(message, tb)
