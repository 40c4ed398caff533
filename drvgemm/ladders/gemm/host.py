"""The host side of the plain kernel signature, and the interface every host
side offers the dispatcher: which instantiation a launch takes (aligned or
not), whether the kernel writes beta * C itself for K = 0, the launches of
one product (with K split, where the rung can) and the scratch they need."""
from __future__ import annotations

from ...runtime.launch import LaunchConfig


class PlainHost:
    """The host side of the plain signature: one block per tile_m x tile_n
    tile of C, the registered block and shared memory, the arguments
    (A, B, C, M, N, K, alpha, beta); the ALIGNED=1 instantiation where the
    shape and the pointers allow its vector accesses."""
    name = ""
    unaligned = True       # an ALIGNED=0 instantiation exists
    takes_empty_k = True   # the kernel itself writes beta * C for K = 0

    def aligned(self, rung, m, n, k, pa, pb, pc) -> bool:
        v = rung.vector
        return k % v == 0 and n % v == 0 and pa % 16 == 0 and pb % 16 == 0 and pc % 16 == 0

    def launch_config(self, rung, kernel, a, b, c, m, n, k, alpha, beta, *, stream=None,
                      narrow_output=False) -> LaunchConfig:
        return LaunchConfig(rung.grid(m, n), tuple(rung.block), rung.smem,
                            (a, b, c, m, n, k, alpha, beta))

    def split_counts(self, rung, m, n, k) -> tuple:
        """The split-K counts worth ranking for this shape: the entry's
        ``splits`` that leave every piece at least one element of K."""
        return tuple(s for s in rung.splits if s == 1 or s <= k)

    def workspace_bytes(self, rung, m, n, split) -> int:
        """Device scratch that ``launches`` needs for a split of K (0: none)."""
        return 0

    def launches(self, rung, kernel, a, b, c, m, n, k, alpha, beta, *, stream=None,
                 narrow_output=False, split=1, workspace=0) -> list:
        """The launches of one product, in stream order, as (Kernel,
        LaunchConfig) pairs: one for an unsplit K. A host side that can split
        K (``rung.splits``) returns the partial products and their
        deterministic reduction, using ``workspace`` (``workspace_bytes``)."""
        if split != 1:
            raise ValueError(f"{rung.name} does not split K (splits {rung.splits})")
        return [(kernel, self.launch_config(rung, kernel, a, b, c, m, n, k, alpha, beta,
                                            stream=stream, narrow_output=narrow_output))]
