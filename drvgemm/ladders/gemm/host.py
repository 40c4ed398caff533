"""The host side of the plain kernel signature, and the interface every host
side offers the dispatcher: which instantiation a launch takes (aligned or
not), whether the kernel writes beta * C itself for K = 0, the launches of
one product (with K split, where the rung can), the scratch they need, and a
``Binding``: those launches for one call signature, rebuilt cheaply for the
pointers of each call."""
from __future__ import annotations

from ...runtime import driver, dtypes
from ...runtime.launch import LaunchConfig
from . import split_k

# The grid's y (and z) dimension holds at most 65535 blocks on every CUDA
# device; the plain kernels read blockIdx.y as the tile row of C.
MAX_GRID_Y = 65535
# A piece of a split K runs at least this many k-tiles: the SIMT main loop
# double-buffers, so a shorter piece is mostly pipeline fill and epilogue,
# which the model's figures (fitted on long K) do not price. On the H200,
# pieces of 8 or 9 k-tiles ran 4-6 us over their predictions (fp32 128^3
# split 2, 256^3 split 4, 127x8191x131 split 2 on the 64x64 tile), pieces
# of 32 or more within 10 % (32x32x131072 split 512, 1000x700x900 split 3).
MIN_PIECE_K_TILES = 16


class Binding:
    """The launches of one call signature (shape, types, alignment class,
    split, stream: dispatch.py's cached ``_Call``) for the pointers of each
    call. ``binding(pa, pb, pc, alpha, beta, ws)`` -> (calls, keep): calls
    as (kernel, grid, block, args, smem, cluster) tuples in stream order,
    ``keep`` what must live until they are enqueued. ``replayable``: the
    calls of one set of pointers and scalars may be launched again as they
    are (a binding that enqueues work of its own per call, such as a
    staging copy, is not). This one asks the rung's ``launches`` every
    time, which is right for any host side; the host sides' own bindings
    (PlainBinding, small_m.SmallMBinding, hopper.TmaBinding) build the
    launches once and put each call's pointers and scalars into them, since
    a caller's allocator and the shape suite's rotating operands bring new
    pointers on most calls."""
    replayable = True

    def __init__(self, rung, kernel, m, n, k, *, stream, narrow_output, split):
        self.rung, self.kernel, self.m, self.n, self.k = rung, kernel, m, n, k
        self.stream, self.narrow, self.split = stream, narrow_output, split

    def __call__(self, pa, pb, pc, alpha, beta, ws):
        steps = self.rung.launches(self.kernel, pa, pb, pc, self.m, self.n, self.k, alpha, beta,
                                   stream=self.stream, narrow_output=self.narrow,
                                   split=self.split, workspace=ws)
        calls = [(kern, cfg.grid, cfg.block, cfg.args, cfg.smem, cfg.cluster)
                 for kern, cfg in steps]
        return calls, [cfg.keepalive for _, cfg in steps if cfg.keepalive]


class PlainBinding(Binding):
    """The plain signature's launches for one call signature: computed once
    (the first call, through ``launches``), then only the pointers and
    scalars are put into copies of their argument lists -- the kernel's
    (A, B, C or the workspace, M, N, K, alpha, beta) and, for a split K, the
    reduction's (workspace, C, count, stride, splits, alpha, beta). A C too
    tall for one grid (row bands at offsets from A and C) asks ``launches``
    every time."""

    def __init__(self, rung, kernel, m, n, k, *, stream, narrow_output, split):
        super().__init__(rung, kernel, m, n, k, stream=stream, narrow_output=narrow_output,
                         split=split)
        self._calls = None

    def __call__(self, pa, pb, pc, alpha, beta, ws):
        calls = self._calls
        if calls is None:
            calls, keep = super().__call__(pa, pb, pc, alpha, beta, ws)
            split = self.rung.host_side.split_k_build(self.rung, self.k, self.split)
            if not keep and len(calls) == (2 if split else 1):   # not row bands
                self._calls = calls
            return calls, keep
        (kern, grid, block, args, smem, cluster), *rest = calls
        if not rest:        # one piece: (A, B, C, M, N, K, alpha, beta)
            return [(kern, grid, block, (pa, pb, pc) + args[3:6] + (alpha, beta), smem,
                     cluster)], ()
        rk, rgrid, rblock, rargs, rsmem, rcluster = rest[0]
        return [(kern, grid, block, (pa, pb, ws) + args[3:], smem, cluster),
                (rk, rgrid, rblock, (ws, pc) + rargs[2:5] + (alpha, beta), rsmem, rcluster)], ()


class PlainHost:
    """The host side of the plain signature: one block per tile_m x tile_n
    tile of C, the registered block and shared memory, the arguments
    (A, B, C, M, N, K, alpha, beta); the ALIGNED=1 instantiation where the
    shape and the pointers allow its vector accesses."""
    name = ""
    unaligned = True       # an ALIGNED=0 instantiation exists
    takes_empty_k = True   # the kernel itself writes beta * C for K = 0
    # The kernels wait for the grid before them (Kernel.dependent_launch): rung
    # 20's and 30's do; the SIMT and mma.sync rungs were left as they are.
    dependent_launch = False

    def instantiation_defines(self, rung, aligned: bool) -> dict:
        """-D defines that depend on the instantiation beyond ALIGNED (none
        here; rung 30's shared memory does)."""
        return {}

    def aligned(self, rung, m, n, k, pa, pb, pc) -> bool:
        v = rung.vector
        return k % v == 0 and n % v == 0 and pa % 16 == 0 and pb % 16 == 0 and pc % 16 == 0

    def launch_config(self, rung, kernel, a, b, c, m, n, k, alpha, beta, *, stream=None,
                      narrow_output=False) -> LaunchConfig:
        return LaunchConfig(rung.grid(m, n), tuple(rung.block), rung.smem,
                            (a, b, c, m, n, k, alpha, beta))

    def split_counts(self, rung, m, n, k) -> tuple:
        """The split-K counts worth ranking for this shape: the entry's
        ``splits`` that leave every piece at least MIN_PIECE_K_TILES k-tiles
        (BK) of K."""
        kt = self.k_tiles(rung, k)
        return tuple(s for s in rung.splits if s == 1 or s * MIN_PIECE_K_TILES <= kt)

    @staticmethod
    def k_tiles(rung, k) -> int:
        return -(-int(k) // int(rung.defines.get("BK", 1)))

    def workspace_bytes(self, rung, m, n, split) -> int:
        """Device scratch that ``launches`` needs for a split of K (0: none):
        S fp32 partials of M x N (split_k.py)."""
        return split_k.split_workspace_bytes(m, n, split) if rung.has_split_k_build else 0

    def split_k_build(self, rung, k, split) -> bool:
        """Whether ``launches`` for this split of K runs the rung's separate
        split-K instantiation (rung_kernel(..., split_k=True)); False: the
        kernel of one piece, the one passed in."""
        return rung.has_split_k_build and min(int(split), self.k_tiles(rung, k)) > 1

    def split_in_kernel(self, rung, m, n, k, split, sm_count) -> bool:
        """Whether the kernel adds the pieces of this split itself (no
        reduction launch, no pass over M x N partials) on a device of
        ``sm_count`` SMs: never here."""
        return False

    def binding(self, rung, kernel, m, n, k, *, stream=0, narrow_output=False,
                split=1) -> Binding:
        """The launches of one call signature, for each call's pointers."""
        return PlainBinding(rung, kernel, m, n, k, stream=stream, narrow_output=narrow_output,
                            split=split)

    def launches(self, rung, kernel, a, b, c, m, n, k, alpha, beta, *, stream=None,
                 narrow_output=False, split=1, workspace=0) -> list:
        """The launches of one product, in stream order, as (Kernel,
        LaunchConfig) pairs: one for an unsplit K. A host side that can split
        K (``rung.splits``) returns the partial products and their
        deterministic reduction, using ``workspace`` (``workspace_bytes``)."""
        if split != 1 and not rung.has_split_k_build:
            raise ValueError(f"{rung.name} does not split K (splits {rung.splits})")
        s = max(1, min(int(split), self.k_tiles(rung, k)))
        if s > 1:
            return self.split_launches(rung, kernel, a, b, c, m, n, k, alpha, beta, s,
                                       workspace, narrow_output)
        if getattr(kernel, "split_k", False):
            raise ValueError(f"{rung.name}: K in one piece runs the SPLIT_K=0 build "
                             "(the split-K build writes a partial product, not C)")
        cfg = self.launch_config(rung, kernel, a, b, c, m, n, k, alpha, beta,
                                 stream=stream, narrow_output=narrow_output)
        if cfg.grid[1] <= MAX_GRID_Y:
            return [(kernel, cfg)]
        return [(kernel, self.launch_config(rung, kernel, pa, b, pc, rows, n, k, alpha, beta,
                                            stream=stream, narrow_output=narrow_output))
                for pa, pc, rows in self.row_blocks(rung, a, c, m, n, k, narrow_output)]

    def split_launches(self, rung, kernel, a, b, c, m, n, k, alpha, beta, s, workspace,
                       narrow_output=False) -> list:
        """K in ``s`` > 1 pieces (at most one per k-tile): the split-K build on
        a grid of s layers into ``workspace``, then the reduction into C."""
        if workspace is None or (isinstance(workspace, int) and workspace == 0):
            raise ValueError(f"{rung.name} split {s}: a workspace of "
                             f"{self.workspace_bytes(rung, m, n, s)} bytes is needed")
        gx, gy, _ = rung.grid(m, n)
        if gy > MAX_GRID_Y:
            raise ValueError(f"{rung.name}: {m} rows are {gy} tiles, more than a split-K "
                             f"grid holds ({MAX_GRID_Y}); split 1 takes any M")
        kern = kernel
        if not getattr(kernel, "split_k", False):
            # the unsplit build was passed (gemm() passes the split one): compile
            # the split build of the instantiation these pointers take
            pa, pb, pc = (driver.device_pointer(x, w) for x, w in ((a, "A"), (b, "B"), (c, "C")))
            kern = split_k.split_kernel(rung, kernel, narrow_output=narrow_output,
                                        aligned=self.aligned(rung, m, n, k, pa, pb, pc))
        partial = LaunchConfig((gx, gy, s), tuple(rung.block), rung.smem,
                               (a, b, workspace, m, n, k, 1.0, 0.0))
        out = rung.precision if narrow_output else "fp32"
        return [(kern, partial), split_k.reduce_launch(workspace, c, m, n, s, alpha, beta, out)]

    def row_blocks(self, rung, a, c, m, n, k, narrow_output=False) -> list:
        """M too tall for one grid (more than 65535 tiles of tile_m rows):
        (A pointer, C pointer, rows) of consecutive bands of rows of C, each
        at most 65535 tiles high, A and C offset to the band's first row (A +
        r0*K, C + r0*N elements). Each band is a whole number of tiles, and
        an offset of r0*K (r0*N) elements keeps any 16-byte alignment the
        whole operand had whenever K (N) allows vector accesses."""
        band = MAX_GRID_Y * rung.tile_m
        a_bytes = dtypes.itemsize(rung.precision)
        c_bytes = a_bytes if narrow_output else 4
        pa, pc = driver.device_pointer(a, "A"), driver.device_pointer(c, "C")
        return [(pa + r0 * k * a_bytes, pc + r0 * n * c_bytes, min(band, m - r0))
                for r0 in range(0, m, band)]
