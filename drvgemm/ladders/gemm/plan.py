"""The dispatcher's choice, and why: for one product (M, N, K, precision,
C's type, beta, the pointers' alignment class) and one device, every
registered instantiation allowed for kernel="auto" with every split of K its
host side offers, each with a predicted time from analysis/gemm_model.py;
the fastest wins (ties: the earlier entry of the registry, then the smaller
split), so the choice is a function of the shape and the device only.

Which entries compete: ``Rung.auto`` entries of the math precision (fp32
for float32 inputs unless precision="tf32" asks for TF32; bf16 / fp16 for
those inputs), that run on the device's architecture and can write C's type.
A new registry entry is picked up with no edit here: its family (which
figures of gemm_model.FAMILIES describe it) follows from its host side and
precision (``family_of``), its occupancy from its block, shared memory and
launch bounds, its tile from the entry and its splits from its host side.

No GPU is needed: a device is described by name (the H200 when none is
given) through analysis/devices.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...analysis import gemm_model as gm
from ...analysis.devices import CATALOGUE, DeviceSpec, find, for_device_name
from ...analysis.occupancy import model as occupancy_model
from ...runtime.tensormap import needs_staging, padded_pitch
from . import hopper, small_m
from .registry import RUNGS, Rung, rung_kernel

__all__ = ["Target", "target", "family_of", "arch_ok", "Option", "Plan", "choose",
           "instantiation_key", "candidates"]

IN_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2}


# ---------------------------------------------------------------------------
# the device a choice is made for
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Target:
    name: str
    cc: tuple
    ceilings: gm.Ceilings
    resources: DeviceSpec

    @property
    def sm_count(self) -> int:
        return self.ceilings.sm_count

    @property
    def arch(self) -> str:
        return f"sm_{self.cc[0]}{self.cc[1]}"


_targets: dict = {}


def target(name: str | None = None, cc: tuple | None = None,
           sm_count: int | None = None) -> Target:
    """The Target of a device by name (a driver's "NVIDIA H200" or a user's
    "h100"); None: the H200. ``cc`` / ``sm_count``: the live device's own."""
    key = (name, cc, sm_count)
    t = _targets.get(key)
    if t is None:
        entry = (for_device_name(name) or find(name)) if name else None
        if entry is None or entry.resources is None:
            entry = next(d for d in CATALOGUE if d.name == "H200")
        res = entry.resources
        t = _targets[key] = Target(entry.name, tuple(cc or res.cc),
                                   gm.ceilings(entry.name, sm_count or res.sm_count), res)
    return t


def arch_ok(r: Rung, cc: tuple) -> bool:
    """Whether a device of compute capability ``cc`` runs ``r`` (sm_90a
    entries: exactly sm_90)."""
    need = int(r.arch[3:].rstrip("a"))
    have = cc[0] * 10 + cc[1]
    return have == need if r.arch.endswith("a") else have >= need


# ---------------------------------------------------------------------------
# what the model knows about an entry
# ---------------------------------------------------------------------------
def family_of(r: Rung) -> str:
    """The gemm_model family of an entry: by its host side (TMA + wgmma,
    the small-M stream) and, for the plain signature, by its precision
    (FFMA for fp32, mma.sync for the rest) and tile (below 128 x 128 an fp32
    tile reuses each shared-memory value less)."""
    if r.host == "small_m":
        return "stream"
    if r.host == "tma":
        base = "wgmma_tf32" if r.precision == "tf32" else "wgmma_16"
        # the flagship tile (128 x 256, or 256 x 128 for tf32's C^T) was
        # measured; a smaller wgmma N feeds each shared-memory byte to fewer
        # MMAs and has its own (estimated) figure
        # (the one-consumer members -- 64 rows, or 64 columns of tf32's C^T,
        # each tf32 tile fitted apart -- and the swapped few-row members have
        # their own)
        if swapped(r):
            return f"{base}_swap"
        if r.precision == "tf32" and r.tile_n == 64:
            return f"{base}_{r.tile_m}x64"
        if r.tile_m == 64:
            return f"{base}_64"
        area = r.tile_m * r.tile_n
        return base if area >= 128 * 256 else f"{base}_{'192' if area >= 128 * 192 else '128'}"
    if r.precision == "fp32":
        return "simt_fp32" if r.tile_m * r.tile_n >= 128 * 128 else "simt_fp32_small"
    return "mma_sync_tf32" if r.precision == "tf32" else "mma_sync_16"


def _register_cap(r: Rung) -> int:
    """Registers per thread ptxas may use: the __launch_bounds__ promise
    (MIN_BLOCKS) where the entry makes one, else the architectural cap."""
    threads = r.threads
    per = 65536 // (threads * int(r.defines.get("MIN_BLOCKS", 1)))
    return max(8, min(255, per - per % 8))


_bps: dict = {}


def blocks_per_sm(r: Rung, t: Target) -> int:
    """Resident blocks per SM: 1 for the persistent TMA rung, rung 30's own
    figure, else the occupancy model at the launch-bounds register cap."""
    key = (r.name, t.name)
    v = _bps.get(key)
    if v is None:
        if r.host == "tma":
            v = 1
        elif r.host == "small_m":
            s = t.resources
            v = small_m.geometry(r).blocks_per_sm(
                smem_per_sm=s.smem_per_sm, smem_reserved=s.smem_reserved_per_block,
                regs_per_sm=s.regs_per_sm, threads_per_sm=s.max_threads_per_sm,
                blocks_limit=s.max_blocks_per_sm)
        else:
            v = max(1, occupancy_model(t.resources, _register_cap(r), r.threads,
                                       r.smem).blocks_per_sm)
        _bps[key] = v
    return v


def instantiation_key(r: Rung, aligned: bool, out: str, arch: str | None = None,
                      split_k: bool = False) -> str:
    """The instantiation as the SASS manifest names it:
    gemm/<rung>/aligned=<0|1>/c=<C type>/<arch>, or for the split-K build
    (SPLIT_K=1) gemm/<rung>/aligned=<0|1>/c=<C type>/splitk/<arch>."""
    arch = arch or (r.arch if r.arch.endswith("a") else "sm_90")
    if r.source.endswith(".ptx"):
        return f"gemm/{r.name}/{arch}"
    return (f"gemm/{r.name}/aligned={int(bool(aligned))}/c={out}/"
            + ("splitk/" if split_k else "") + arch)


# ---------------------------------------------------------------------------
# options and the plan
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Option:
    rung: Rung
    split: int
    aligned: bool
    prediction: gm.Prediction
    family: str

    @property
    def name(self) -> str:
        return self.rung.name + (f"/split={self.split}" if self.split > 1 else "")

    @property
    def seconds(self) -> float:
        return self.prediction.seconds


def _predict(r: Rung, split: int, aligned: bool, m, n, k, precision, out_bytes,
             beta_reads_c, t: Target, residues) -> gm.Prediction:
    fam = family_of(r)
    in_bytes = IN_BYTES[precision]
    if fam == "stream":
        g = small_m.geometry(r)
        strips, zchunks, splits, sps = g.shape(m, n, k, split)
        c = gm.StreamCandidate(r.precision, g.rows, g.strip, g.kstep, g.threads,
                               blocks_per_sm(r, t), g.in_flight_bytes, strips, zchunks,
                               splits, sps, small_m.reduction_group(splits))
        return gm.predict_stream(c, m, n, k, in_bytes=in_bytes, out_bytes=out_bytes,
                                 dev=t.ceilings, beta_reads_c=beta_reads_c, aligned=aligned)
    staged = unkept = 0
    if r.host == "tma":
        pa, pb, _ = residues
        es = hopper.ELEM_BYTES[r.precision]
        for ptr, rows, cols in ((pa, m, k), (pb, k, n)):
            if needs_staging(ptr, cols, es):
                staged += rows * cols * es
                if padded_pitch(cols * es) * rows > hopper.KEEP_STAGING_BYTES:
                    unkept += rows * cols * es
    ws = (r.host_side.workspace_bytes(r, m, n, split) > 0
          and not r.host_side.split_in_kernel(r, m, n, k, split, t.ceilings.sm_count))
    c = gm.Candidate(gm.FAMILIES[fam], r.tile_m, r.tile_n, split, ws, blocks_per_sm(r, t),
                     aligned, staged, unkept)
    return gm.predict(c, m, n, k, in_bytes=in_bytes, out_bytes=out_bytes, dev=t.ceilings,
                      beta_reads_c=beta_reads_c)


# A plain (SIMT) rung's split of K competes only where the model expects it
# at least this much faster than the same rung's K in one piece: its SIMT
# figures carry no per-piece cost (pipeline fill, a partial tile's
# epilogue), and on the H200 split builds ran 7-11 % over their predictions
# (h200-shapes.json: 1024x1024x32768, 512x512x65536, 128x4096x14336), so a
# smaller predicted gain (8192^3 split 3: 0.3 %) is within the error. Few
# tiles (1024^2: 64 of 132 SMs) gain far more; so does a last wave that runs
# a fifth full (3072^2 in 128 x 128 tiles, 2.2 waves: 20 % predicted).
PLAIN_SPLIT_MIN_GAIN = 0.10


def _worth_splitting(options: list) -> list:
    """``options`` without the plain rungs' splits that gain less than
    PLAIN_SPLIT_MIN_GAIN over their own rung's single piece."""
    whole = {o.rung.name: o.seconds for o in options if o.split == 1}
    return [o for o in options
            if o.split == 1 or o.rung.host != "" or o.rung.name not in whole
            or o.seconds <= (1.0 - PLAIN_SPLIT_MIN_GAIN) * whole[o.rung.name]]


def swapped(r: Rung) -> bool:
    """A swapped 16-bit rung-20 member (C^T over strips of B, for a few rows)."""
    return r.host == "tma" and r.precision != "tf32" and bool(int(r.defines.get("SWAP_AB", 0)))


def swapped_domain(r: Rung, m: int) -> bool:
    """The products auto offers a swapped member: M rows that its tile holds
    and no smaller swapped tile of its precision does."""
    smaller = [x.tile_m for x in RUNGS
               if swapped(x) and x.precision == r.precision and x.tile_m < r.tile_m]
    return m <= r.tile_m and all(m > t for t in smaller)


def candidates(precision: str, narrow_output: bool, t: Target, m: int = 1) -> list[Rung]:
    """The entries kernel="auto" ranks for this math precision and C type.
    precision="tf32" permits TF32 without asking for it: the fp32 entries
    compete too (exact fp32 where they are the faster, as at small M)."""
    allowed = ("tf32", "fp32") if precision == "tf32" else (precision,)
    return [r for r in RUNGS if r.auto and r.precision in allowed and arch_ok(r, t.cc)
            and (r.narrow_output or not narrow_output)
            and (r.host != "small_m" or small_m.auto_domain(r, m))
            and (not swapped(r) or swapped_domain(r, m))]


@dataclass
class Plan:
    """What gemm() launches for one product, and why. ``kernel``: the rung's
    name; ``instantiation``: its SASS-manifest key; ``split``: pieces of K;
    ``predicted_s``: the model's time; ``alternatives``: every other option
    ranked, as (name, predicted_s), fastest first."""
    kernel: str
    instantiation: str
    split: int
    predicted_s: float
    alternatives: list
    m: int
    n: int
    k: int
    precision: str           # the math: fp32, tf32, bf16, fp16
    out: str                 # C's type: fp32, bf16, fp16
    aligned: bool
    grid: tuple
    block: tuple
    smem: int
    workspace_bytes: int
    device: str
    prediction: gm.Prediction
    family: str
    rung: Rung = field(repr=False)
    reason: str = "auto"     # "auto", "kernel=<name>", "tuned"

    @property
    def narrow_output(self) -> bool:
        return self.out != "fp32"

    def compiled(self):
        """The compiled Kernel of the chosen instantiation (compiles when not
        yet cached; no GPU needed): its .cubin, .resources, SASS."""
        return rung_kernel(self.rung, self.aligned, narrow_output=self.narrow_output,
                           split_k=self.split_k)

    @property
    def split_k(self) -> bool:
        """Whether the product runs the rung's separate split-K build."""
        return self.rung.host_side.split_k_build(self.rung, self.k, self.split)

    def describe(self) -> str:
        fam = gm.FAMILIES.get(self.family)
        lines = [
            f"{self.m} x {self.n} x {self.k} {self.precision}, C {self.out} on {self.device}: "
            f"{self.kernel}" + (f" split {self.split}" if self.split > 1 else "") +
            f" ({self.reason})",
            f"  instantiation  {self.instantiation}",
            f"  launch         grid {self.grid}, block {self.block}, {self.smem} B shared"
            + (f", workspace {self.workspace_bytes} B" if self.workspace_bytes else ""),
            f"  predicted      {self.prediction.describe()}",
            f"  family         {self.family}" + (
                f": {fam.efficiency:.3g} of {fam.unit}, fixed {fam.fixed_s * 1e6:.1f} us "
                f"({fam.source})" if fam else " (streaming model: gemm_model.predict_stream)"),
        ]
        if self.alternatives:
            lines.append("  alternatives")
            for name, s in self.alternatives[:12]:
                lines.append(f"    {s * 1e6:10.1f} us  {name}")
            if len(self.alternatives) > 12:
                lines.append(f"    ... {len(self.alternatives) - 12} more")
        return "\n".join(lines)

    __str__ = describe


def _launch_summary(r: Rung, m, n, k, split, t: Target) -> tuple:
    if r.host == "small_m":
        return small_m.SMALL_M.grid(r, m, n, k, split), tuple(r.block), r.smem
    if r.host == "tma":
        geo = hopper.geometry(r)
        d = r.defines
        resident = t.sm_count if int(d.get("PERSISTENT", 0)) else None
        blocks = hopper.wgmma_grid_blocks(geo, m, n, int(d.get("CLUSTER", 1)), resident,
                                          balanced=bool(int(d.get("BALANCE", 0))))
        return (blocks * max(1, split) if split > 1 else blocks, 1, 1), tuple(r.block), r.smem
    g = r.grid(m, n)
    return (g[0], g[1], split if split > 1 else 1), tuple(r.block), r.smem


def _padding(r: Rung, m: int, n: int) -> float:
    """The fraction of the elements r's tiles compute that lie outside C."""
    tm, tn = max(1, r.tile_m), max(1, r.tile_n)
    covered = -(-m // tm) * tm * (-(-n // tn)) * tn
    return 1.0 - m * n / covered if covered else 0.0


# Where a 128-row tile holds every row of A (65..128 rows), the 64-row
# members do not split K: each strip of B is then read by two 64-row tiles,
# and with the split's partials to reduce besides they ran 7-9 % slower than
# a 128-row tile split 3 (bf16, 16-bit C, drvgemm tune on the H200: 128 x
# 4096 x 14336 45.4 against 41.5 us, 128 x 4096 x 11008 37.0 against 34.5;
# results/h200-wgmma-family-64.json, fp32 C: 45.4 against 41.7), which the
# model, counting B's bytes once, does not see. In one piece they still win
# there (127 x 8192 x 128: 4.9 against 5.5 us; 128 x 5120 x 5120: 25.4
# against 25.9). Past 128 rows nothing was measured: unchanged.
def _one_tile_of_rows(r: Rung, split: int, m: int) -> bool:
    return not (family_of(r) == "wgmma_16_64" and split > 1 and r.tile_m < m <= 2 * r.tile_m)


def choose(m: int, n: int, k: int, precision: str, *, out: str = "fp32",
           beta_reads_c: bool = False, kernel: str = "auto", residues=(0, 0, 0),
           t: Target | None = None, tuned: dict | None = None) -> Plan:
    """The plan for one product. ``precision``: the math (fp32, tf32, bf16,
    fp16); ``out``: C's type; ``residues``: the three pointers modulo 16
    (0: aligned, as fresh allocations are); ``kernel``: "auto" or a rung
    name (then only its splits are ranked); ``tuned``: {rung name: split}
    measured winners for this shape (drvgemm tune), preferred when present."""
    if m == 0 or n == 0:
        # gemm() returns at once for these: nothing to rank (and the model's
        # bytes per block would divide by zero blocks)
        raise ValueError(f"an empty C ({m} x {n}): gemm() launches nothing for it, so there is "
                         "no plan (K = 0 with a non-empty C has one: C = beta * C)")
    t = t or target()
    narrow = out != "fp32"
    if kernel == "auto":
        rungs = candidates(precision, narrow, t, m)
        if not rungs:
            what = f"{precision} with a {out} C" if narrow else precision
            raise ValueError(f"no registered rung runs {what} on {t.name} ({t.arch})")
        reason = "auto"
    else:
        from_name = {r.name: r for r in RUNGS}
        rungs = [from_name[kernel]]
        reason = f"kernel={kernel}"
    pa, pb, pc = residues
    out_bytes = 4 if out == "fp32" else 2
    options = []
    for r in rungs:
        host = r.host_side
        aligned = host.aligned(r, m, n, k, pa, pb, pc)
        for s in (host.split_counts(r, m, n, k) if k > 0 else (1,)):
            if kernel == "auto" and not _one_tile_of_rows(r, s, m):
                continue
            p = _predict(r, s, aligned, m, n, k, precision, out_bytes, beta_reads_c, t,
                         residues)
            options.append(Option(r, s, aligned, p, family_of(r)))
    options = _worth_splitting(options)
    order = {r.name: i for i, r in enumerate(RUNGS)}
    # Equal times (bound by the same bytes: the padding of an edge tile is
    # only charged as compute, which the memory time then hides): the tile
    # that computes less padding (64-row tiles at M <= 64: 44 -> 35 us on
    # 64 x 14336 x 4096, benchmarks/results/h200-wgmma-family-64.json).
    # Host-bound calls (gm.host_s) tie at their host's time: then the GPU's.
    options.sort(key=lambda o: (o.seconds, o.prediction.gpu_s, _padding(o.rung, m, n),
                                order[o.rung.name], o.split))
    best = options[0]
    if tuned:
        hit = [o for o in options if tuned.get(o.rung.name) == o.split]
        if hit:
            best, reason = hit[0], "tuned"
    r = best.rung
    grid, block, smem = _launch_summary(r, m, n, k, best.split, t)
    return Plan(
        kernel=r.name,
        instantiation=instantiation_key(r, best.aligned, out,
                                        r.arch if r.arch.endswith("a") else t.arch,
                                        split_k=r.host_side.split_k_build(r, k, best.split)),
        split=best.split, predicted_s=best.seconds,
        alternatives=[(o.name, o.seconds) for o in options if o is not best],
        m=m, n=n, k=k, precision=precision, out=out, aligned=best.aligned, grid=grid,
        block=block, smem=smem, workspace_bytes=r.host_side.workspace_bytes(r, m, n, best.split),
        device=t.name, prediction=best.prediction, family=best.family, rung=r, reason=reason)
