"""The device catalogue: one entry per GPU drvgemm knows, with what the
occupancy model needs (per-SM resources, ``DeviceSpec``) and what the
roofline needs (peaks and bandwidths, ``RooflineSpec``), and one rule for
finding an entry by a name a user types or the driver reports.

Pure data: no GPU, no CUDA import. ``DeviceSpec.from_device`` builds a spec
from ``drvgemm.device()``'s properties when a GPU is present.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping

__all__ = ["DeviceSpec", "RooflineSpec", "Device", "CATALOGUE", "PRECISIONS", "name_key",
           "find", "for_device_name"]

# Math precisions with a peak of their own (TF32 reads fp32 words).
PRECISIONS = ("fp32", "tf32", "bf16", "fp16")


# --------------------------------------------------------------------------
# what the occupancy model needs
# --------------------------------------------------------------------------
@dataclass(frozen=True)
class DeviceSpec:
    """The per-SM resources that bound occupancy. Build a custom one with
    ``dataclasses.replace(SPECS["H200"], smem_per_sm=...)`` or from scratch."""
    name: str
    max_threads_per_sm: int             # warp slots x warp size
    max_blocks_per_sm: int              # block slots
    regs_per_sm: int
    regs_per_block: int
    smem_per_sm: int                    # largest shared-memory carveout, bytes
    smem_per_block: int                 # per-block limit without opt-in (48 KiB)
    smem_per_block_optin: int           # per-block limit after opt-in
    smem_reserved_per_block: int = 0    # taken by the driver from every block (1 KiB on sm_80+)
    smem_alloc_unit: int = 128          # blocks get shared memory in multiples of this
    smem_carveouts_kib: tuple | None = None   # shared-memory sizes an SM can be configured to
    reg_alloc_unit: int = 256           # registers are given to a warp in multiples of this
    reg_partitions: int = 4             # register file split across the four warp schedulers
    max_regs_per_thread: int = 255
    max_threads_per_block: int = 1024
    warp_size: int = 32
    warp_alloc_granularity: int = 1     # warps are given to a block in multiples of this
    barrier_slots_per_sm: int | None = None   # named-barrier slots (sm_90+); None: not a limit
    cc: tuple | None = None             # compute capability, (9, 0)
    sm_count: int | None = None

    def __post_init__(self):
        if self.max_threads_per_sm % self.warp_size:
            raise ValueError(f"max_threads_per_sm ({self.max_threads_per_sm}) must be a "
                             f"multiple of the warp size ({self.warp_size})")
        for f in ("max_threads_per_sm", "max_blocks_per_sm", "regs_per_sm", "regs_per_block",
                  "smem_per_sm", "smem_alloc_unit", "reg_alloc_unit", "reg_partitions",
                  "max_threads_per_block", "warp_size", "warp_alloc_granularity"):
            if getattr(self, f) <= 0:
                raise ValueError(f"DeviceSpec.{f} must be positive, not {getattr(self, f)}")

    @property
    def max_warps_per_sm(self) -> int:
        return self.max_threads_per_sm // self.warp_size

    @property
    def arch(self) -> str | None:
        return f"sm_{self.cc[0]}{self.cc[1]}" if self.cc else None

    @classmethod
    def from_device(cls, props) -> "DeviceSpec":
        """From ``drvgemm.device()``: the driver's numbers, plus the
        allocation rules of that architecture that the driver does not report."""
        cc = tuple(props.cc)
        major = cc[0]
        max_blocks = props.max_blocks_per_sm
        return cls(
            name=props.name, cc=cc, sm_count=props.sm_count,
            max_threads_per_sm=props.max_threads_per_sm, max_blocks_per_sm=max_blocks,
            regs_per_sm=props.regs_per_sm, regs_per_block=props.regs_per_block,
            smem_per_sm=props.smem_per_sm, smem_per_block=props.smem_per_block,
            smem_per_block_optin=props.smem_per_block_optin,
            smem_reserved_per_block=props.smem_reserved_per_block if major >= 8 else 0,
            smem_alloc_unit=128 if major >= 8 else 256,
            smem_carveouts_kib=_carveouts_for(cc),
            max_threads_per_block=props.max_threads_per_block, warp_size=props.warp_size,
            barrier_slots_per_sm=_barrier_slots_for(cc, max_blocks),
        )


def _carveouts_for(cc) -> tuple | None:
    """Shared-memory sizes (KiB) the unified L1/shared array can be split at."""
    major, minor = cc
    full = (0, 8, 16, 32, 64, 100, 132, 164, 196, 228)
    if major == 7:
        return (32, 64) if minor == 5 else (0, 8, 16, 32, 64, 96)
    if major == 8:
        return full[:8] if minor in (0, 7) else full[:6]
    if major in (9, 10, 11):
        return full
    if major == 12:
        return full[:6]
    return None


def _barrier_slots_for(cc, max_blocks) -> int | None:
    """Hopper and later count named barriers (bar.sync ids) per SM: two per
    block slot on most parts, one on a few."""
    major, minor = cc
    if major < 9:
        return None
    single = (major == 10 and minor == 1) or (major == 11 and minor == 0) or major == 12
    return max_blocks * (1 if single else 2)


# --------------------------------------------------------------------------
# what the roofline needs
# --------------------------------------------------------------------------
@dataclass(frozen=True)
class RooflineSpec:
    """The ceilings of one device. Peaks in FLOP/s per precision, bandwidths
    in B/s. ``l2_bw``, ``clock_hz`` and ``dram_latency_cycles`` may be None
    where no trustworthy figure exists; ``measured`` names the figures that
    came from a measurement on the device rather than from a datasheet."""
    name: str
    peak_flops: Mapping[str, float] = field(hash=False)
    dram_bw: float
    l2_bw: float | None = None
    clock_hz: float | None = None
    dram_latency_cycles: float | None = None
    source: str = ""
    measured: tuple = ()

    def peak(self, precision: str = "fp32") -> float:
        try:
            return self.peak_flops[precision]
        except KeyError:
            raise ValueError(
                f"{self.name} has no {precision} peak; it knows "
                f"{', '.join(self.peak_flops) or 'none'}") from None

    def with_measured(self, measured: Mapping[str, float] | None) -> "RooflineSpec":
        """A copy with measured ceilings in place of datasheet ones. Keys:
        a precision name ("fp32", "tf32", "bf16", "fp16") for a peak in
        FLOP/s, or "dram_bw", "l2_bw" (B/s), "clock_hz", "dram_latency_cycles"."""
        if not measured:
            return self
        peaks = dict(self.peak_flops)
        attrs = {}
        for key, value in measured.items():
            if value is None:
                continue
            if not (isinstance(value, (int, float)) and value > 0):
                raise ValueError(f"measured {key} must be a positive number, got {value!r}")
            if key in PRECISIONS:
                peaks[key] = float(value)
            elif key in ("dram_bw", "l2_bw", "clock_hz", "dram_latency_cycles"):
                attrs[key] = float(value)
            else:
                raise ValueError(
                    f"unknown measured figure {key!r}; expected one of "
                    f"{', '.join(list(PRECISIONS) + ['dram_bw', 'l2_bw', 'clock_hz', 'dram_latency_cycles'])}")
        done = tuple(sorted(set(self.measured) | {k for k, v in measured.items() if v is not None}))
        return replace(self, peak_flops=peaks, measured=done, **attrs)


# --------------------------------------------------------------------------
# the catalogue
# --------------------------------------------------------------------------
_HOPPER = dict(
    max_threads_per_sm=2048, max_blocks_per_sm=32, regs_per_sm=65536, regs_per_block=65536,
    smem_per_sm=233472, smem_per_block=49152, smem_per_block_optin=232448,
    smem_reserved_per_block=1024, smem_alloc_unit=128,
    smem_carveouts_kib=(0, 8, 16, 32, 64, 100, 132, 164, 196, 228),
    barrier_slots_per_sm=64, cc=(9, 0), sm_count=132)

_RESOURCES: dict[str, DeviceSpec] = {
    "H200": DeviceSpec(name="H200", **_HOPPER),
    "H100": DeviceSpec(name="H100", **_HOPPER),
    "A100": DeviceSpec(
        name="A100", max_threads_per_sm=2048, max_blocks_per_sm=32, regs_per_sm=65536,
        regs_per_block=65536, smem_per_sm=167936, smem_per_block=49152,
        smem_per_block_optin=166912, smem_reserved_per_block=1024, smem_alloc_unit=128,
        smem_carveouts_kib=(0, 8, 16, 32, 64, 100, 132, 164), cc=(8, 0), sm_count=108),
    # The worked example of the seed notes: 48 warps and 100 KB of shared
    # memory per SM, shared memory counted to the byte, no reservation, no
    # carveout choice. Its block limit of 24 in the table is the warp limit
    # (48 warps / 2-warp blocks), not a block-slot limit.
    "seed": DeviceSpec(
        name="seed", max_threads_per_sm=48 * 32, max_blocks_per_sm=32, regs_per_sm=65536,
        regs_per_block=65536, smem_per_sm=102400, smem_per_block=102400,
        smem_per_block_optin=102400, smem_reserved_per_block=0, smem_alloc_unit=1),
}


_T = 1e12
_G = 1e9

_CEILINGS: dict[str, RooflineSpec] = {
    # The worked example of the design notes (FP32 CUDA cores only, tensor
    # cores left out), so the default report reproduces its figures.
    "rtx4000ada": RooflineSpec(
        "RTX 4000 Ada", {"fp32": 26.7 * _T}, dram_bw=360 * _G, l2_bw=2500 * _G,
        clock_hz=2175e6, dram_latency_cycles=800,
        source="worked example: 26.7 TFLOP/s fp32, 360 GB/s, L2 ~2.5 TB/s, 2175 MHz, 800-cycle DRAM latency"),
    # Hopper/Ampere SXM datasheets; tensor figures are dense (no 2:4 sparsity).
    "h200": RooflineSpec(
        "H200", {"fp32": 67 * _T, "tf32": 494.7 * _T, "bf16": 989.4 * _T, "fp16": 989.4 * _T},
        dram_bw=4.8e12, clock_hz=1980e6, source="H200 SXM datasheet, dense"),
    "h100": RooflineSpec(
        "H100", {"fp32": 67 * _T, "tf32": 494.7 * _T, "bf16": 989.4 * _T, "fp16": 989.4 * _T},
        dram_bw=3.35e12, clock_hz=1980e6, source="H100 SXM datasheet, dense"),
    "a100": RooflineSpec(
        "A100", {"fp32": 19.5 * _T, "tf32": 156 * _T, "bf16": 312 * _T, "fp16": 312 * _T},
        dram_bw=2.039e12, clock_hz=1410e6, source="A100 SXM 80GB datasheet, dense"),
}




def name_key(name: str) -> str:
    """A name reduced to lower-case letters and digits, without an "NVIDIA"
    prefix: "NVIDIA H200", "h200" and "H-200" are the same device."""
    key = "".join(ch for ch in str(name).lower() if ch.isalnum())
    return key[len("nvidia"):] if key.startswith("nvidia") else key


@dataclass(frozen=True)
class Device:
    """One catalogue entry. ``resources`` / ``ceilings`` are None where the
    figures are not known (the worked examples each carry one kind only).
    ``driver_names``: substrings (name_key form) that must all appear in the
    name the driver reports; ``variants``: substrings of variants with
    other clocks or memory, whose ceilings differ from the datasheet's."""
    name: str
    resources: DeviceSpec | None = None
    ceilings: RooflineSpec | None = None
    driver_names: tuple = ()
    variants: tuple = ("pcie", "nvl")

    @property
    def key(self) -> str:
        return name_key(self.name)


CATALOGUE: tuple[Device, ...] = (
    Device("H200", _RESOURCES["H200"], _CEILINGS["h200"], driver_names=("h200",)),
    Device("H100", _RESOURCES["H100"], _CEILINGS["h100"], driver_names=("h100",)),
    # The 80 GB SXM part only: the 40 GB A100 has other memory bandwidth.
    Device("A100", _RESOURCES["A100"], _CEILINGS["a100"], driver_names=("a100", "80gb")),
    Device("RTX 4000 Ada", None, _CEILINGS["rtx4000ada"], driver_names=("rtx4000ada",),
           variants=()),
    Device("seed", _RESOURCES["seed"]),
)


def find(name: str) -> Device | None:
    """The entry a user means by ``name`` ("H200", "h200", "RTX 4000 Ada",
    "rtx4000-ada"), or None."""
    key = name_key(name)
    for d in CATALOGUE:
        if d.key == key:
            return d
    return None


def for_device_name(device_name: str) -> Device | None:
    """The entry for the name the driver reports ("NVIDIA H200"), or None;
    variants with other clocks or memory (PCIe, NVL, 40 GB A100) are not
    matched: their figures differ from the catalogue's."""
    key = name_key(device_name)
    for d in CATALOGUE:
        if d.driver_names and all(n in key for n in d.driver_names):
            if any(v in key for v in d.variants):
                return None
            return d
    return None
