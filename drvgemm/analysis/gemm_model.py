"""How long a GEMM instantiation should take on a shape: the model the
dispatcher ranks candidates by. Pure arithmetic, no GPU.

A candidate is a tile shape (rows x columns of C per unit of work), a split
of K into ``split`` pieces, and what its kernel family reaches when it is
busy: a fraction of the unit's peak on full tiles, a fixed cost per launch
(prologue, epilogue, pipeline fill), and whether the split's partial sums go
through a workspace that a second pass reduces.

    time = fixed + max(compute, memory) + reduction

- compute: the units are dealt to ``slots`` = SMs x blocks per SM in waves;
  each wave lasts as long as one unit (2 * tile_m * tile_n * K/split FLOPs at
  the slot's share of the peak), so a shape that leaves a wave a third full
  pays for a whole one. Edge tiles cost as much as full ones: the tensor
  core computes the padding too.
- memory: every byte of A and B read from DRAM once (the L2 holds the panel
  that neighbouring tiles share), plus C written once (read too when
  beta != 0), at the device's copy bandwidth.
- reduction: a workspace split writes split x M x N fp32 partials and reads
  them back once, again at copy bandwidth, plus a launch.

The figures per family come from measurements on the H200 (see
benchmarks/notes/); a dispatcher that has tuned winners in its per-device
file prefers those, and this model only breaks ties and covers the rest.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Family", "Candidate", "Prediction", "predict", "waves"]


@dataclass(frozen=True)
class Family:
    """What a kernel family reaches on this device when every slot is busy."""
    name: str
    peak_flops: float        # FLOP/s of the unit it uses, whole device
    efficiency: float        # fraction of peak a full wave of full tiles reaches
    fixed_s: float           # per-launch cost beyond the waves (fill, drain, epilogue)
    blocks_per_sm: int = 1   # resident units per SM (occupancy)


@dataclass(frozen=True)
class Candidate:
    family: Family
    tile_m: int
    tile_n: int
    split: int = 1           # pieces of K; > 1 means partial sums to be reduced
    workspace: bool = True   # split partials through a workspace pass (else in-kernel)


@dataclass(frozen=True)
class Prediction:
    seconds: float
    compute_s: float
    memory_s: float
    reduce_s: float
    units: int
    waves: int
    wave_fill: float         # units / (waves x slots): 1.0 is a full last wave

    def describe(self) -> str:
        return (f"{self.seconds * 1e6:.1f} us (compute {self.compute_s * 1e6:.1f}, memory "
                f"{self.memory_s * 1e6:.1f}, reduce {self.reduce_s * 1e6:.1f}; {self.units} "
                f"units in {self.waves} waves, {self.wave_fill:.0%} full)")


def waves(units: int, slots: int) -> int:
    return max(1, math.ceil(units / slots))


def predict(c: Candidate, m: int, n: int, k: int, *, in_bytes: int, out_bytes: int,
            sm_count: int, dram_bw: float, beta_reads_c: bool = False,
            launch_s: float = 2e-6) -> Prediction:
    """The predicted time of candidate ``c`` on an M x N x K product."""
    f = c.family
    tiles = math.ceil(m / c.tile_m) * math.ceil(n / c.tile_n)
    units = tiles * c.split
    slots = sm_count * f.blocks_per_sm
    w = waves(units, slots)
    k_unit = math.ceil(k / c.split)
    unit_flops = 2.0 * c.tile_m * c.tile_n * k_unit
    slot_rate = f.peak_flops * f.efficiency / slots
    compute = w * unit_flops / slot_rate
    c_bytes = m * n * out_bytes * (2 if beta_reads_c else 1)
    memory = ((m * k + k * n) * in_bytes + c_bytes) / dram_bw
    reduce = 0.0
    if c.split > 1 and c.workspace:
        reduce = 2.0 * c.split * m * n * 4 / dram_bw + launch_s
    total = f.fixed_s + launch_s + max(compute, memory) + reduce
    return Prediction(total, compute, memory, reduce, units, w, units / (w * slots))
