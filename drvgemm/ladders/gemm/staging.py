"""Staging of rung 20's misaligned operands: a tensor map needs a 16-byte
aligned base and rows a multiple of 16 bytes apart, so an operand without
them (runtime.tensormap.needs_staging: K = 131 in bf16 is 262-byte rows) is
first copied into rows of a padded pitch (tensormap.padded_pitch), and the
map describes the copy.

The copy is cu/gemm/pad_rows.cu: one launch for both operands, enqueued on
the product's stream before it. Two buffers hold the copy:
``PaddedBuffer``, kept by a cached call signature (its address never
changes, so neither does its map), and ``PaddedScratch``, allocated and
freed on the stream around one product (operands too large to keep a
buffer per signature: hopper.KEEP_STAGING_BYTES)."""
from __future__ import annotations

from ...runtime import driver
from ...runtime.kernel import compile_once
from ...runtime.launch import LaunchConfig, launch
from ...runtime.tensormap import padded_pitch

__all__ = ["PAD_ENTRIES", "pad_kernel", "pad_launch_config", "PaddedBuffer", "PaddedScratch",
           "enqueue_pad"]

PAD_THREADS = 256
PAD_BLOCKS_PER_SM = 4       # with a grid-stride loop: enough blocks to fill the GPU
PAD_ENTRIES = {2: "pad_rows_2", 4: "pad_rows_4"}   # element size -> entry

def pad_kernel(elem_size: int):
    """The compiled copy for elements of ``elem_size`` bytes (2 or 4) for the
    current device (sm_90 with none), cached per process."""
    entry = PAD_ENTRIES.get(int(elem_size))
    if entry is None:
        raise ValueError(f"pad_rows copies 2- or 4-byte elements, not {elem_size!r}-byte ones")
    return compile_once("pad_rows.cu", entry, dependent_launch=True)


def pad_launch_config(copies, sm_count: int | None = None) -> LaunchConfig:
    """The launch of pad_rows over one or two copies, each (src, dst, rows,
    width, pitch) in bytes (dst: 16-byte aligned, pitch: padded_pitch(width)):
    grid.y = the number of copies, grid.x enough blocks of 16-byte chunks for
    the larger, at most PAD_BLOCKS_PER_SM per SM."""
    copies = [tuple(int(v) for v in c) for c in copies]
    if not 1 <= len(copies) <= 2:
        raise ValueError(f"pad_rows takes one or two copies, not {len(copies)}")
    for src, dst, rows, width, pitch in copies:
        if dst % 16 or pitch % 16 or pitch < width or rows < 0 or width < 0:
            raise ValueError(f"pad_rows: destination {dst:#x} with pitch {pitch} for rows of "
                             f"{width} bytes (needs 16-byte alignment and pitch >= width)")
    chunks = max(rows * pitch // 16 for _, _, rows, _, pitch in copies)
    sms = sm_count or driver.device().sm_count
    blocks = max(1, min(-(-chunks // PAD_THREADS), PAD_BLOCKS_PER_SM * sms))
    args = [v for c in copies for v in c] + [0] * 5 * (2 - len(copies))
    return LaunchConfig((blocks, len(copies), 1), (PAD_THREADS, 1, 1), 0, tuple(args))


class PaddedBuffer:
    """A kept device buffer for the padded copy of one operand shape."""

    def __init__(self, rows: int, cols: int, elem_size: int):
        self.rows, self.width = int(rows), int(cols) * int(elem_size)
        self.pitch = padded_pitch(self.width)
        self.buffer = driver.empty((max(self.pitch * self.rows, 16),), "uint8")
        self.ptr = self.buffer.ptr

    def copy_of(self, src: int) -> tuple:
        """This buffer's copy of ``src``, as pad_launch_config takes it."""
        return (src, self.ptr, self.rows, self.width, self.pitch)


class PaddedScratch:
    """A stream-ordered device buffer for the padded copy of one operand,
    freed (cuMemFreeAsync on the same stream) when this object goes away,
    which the caller arranges to be after the launches that read it."""

    def __init__(self, rows: int, cols: int, elem_size: int, stream: int, stream_owner=None):
        d = driver.bindings()
        # The stream object (when there is one) stays alive as long as this
        # buffer: freeing on a stream that was already destroyed crashes the
        # driver, and a caller's locals may well go in that order.
        self._stream_owner = stream_owner
        self.generation = driver.generation()
        self.rows, self.width = int(rows), int(cols) * int(elem_size)
        self.pitch = padded_pitch(self.width)
        self.stream = stream
        self.ptr = 0
        nbytes = max(self.pitch * self.rows, 16)
        self.ptr = int(driver.check(d.cuMemAllocAsync(nbytes, d.CUstream(stream)),
                                    f"cuMemAllocAsync({nbytes})"))

    def copy_of(self, src: int) -> tuple:
        return (src, self.ptr, self.rows, self.width, self.pitch)

    def free(self):
        if self.ptr and self.generation != driver.generation():
            self.ptr = 0      # went with the context a reset() replaced
        if self.ptr:
            ptr, self.ptr = self.ptr, 0
            d = driver.bindings()
            stream = self.stream
            if isinstance(self._stream_owner, driver.Stream) and not self._stream_owner.ptr:
                # Closed by its owner: wait for all work, free on the legacy stream.
                driver.synchronize()
                stream = 0
            d.cuMemFreeAsync(ptr, d.CUstream(stream))

    def __del__(self):
        try:
            self.free()
        except Exception:
            pass


def enqueue_pad(copies, elem_size: int, stream) -> None:
    """Launch pad_rows over ``copies`` (see pad_launch_config) on ``stream``."""
    cfg = pad_launch_config(copies)
    launch(pad_kernel(elem_size), cfg.grid, cfg.block, cfg.args, stream=stream)
