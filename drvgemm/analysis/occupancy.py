"""How many blocks of a kernel an SM holds at once, which resource stops it
holding more, and what to change to raise it: the model.

The model (``model``) is pure Python and works for any device description
(drvgemm/analysis/devices.py), with or without a GPU: it follows the
rules the hardware allocates by (registers per warp in fixed units, taken
from one of four register-file partitions; shared memory per block in fixed
units plus a per-block reservation; a configurable L1/shared carveout; warp
slots, block slots and, from Hopper on, barrier slots). ``drvgemm.occupancy``
(drvgemm/tools/kernel_occupancy.py) also asks the driver when a GPU is
present, so the two can be compared; they must agree exactly.

The rules follow the public description of the CUDA occupancy calculator
(the cuda_occupancy.h header shipped with the toolkit); nothing here is
taken from it but the arithmetic the hardware imposes.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from .devices import CATALOGUE, DeviceSpec, find

__all__ = ["DeviceSpec", "SPECS", "get_spec", "Occupancy", "model", "available_dynamic_smem",
           "max_potential_block_size", "kernel_max_threads", "block_threads", "parse_size",
           "format_size"]


# The devices the model knows by name (drvgemm/analysis/devices.py).
SPECS: dict[str, DeviceSpec] = {d.name: d.resources for d in CATALOGUE if d.resources}


def get_spec(name: str) -> DeviceSpec:
    d = find(name)
    if d is None or d.resources is None:
        raise ValueError(f"no built-in device spec named {name!r}; built in: {', '.join(SPECS)}")
    return d.resources


# --------------------------------------------------------------------------
# the model
# --------------------------------------------------------------------------
# Order in which tied limits are named: a full SM is reported as "warps",
# a block that cannot run at all as "block size".
_LIMIT_ORDER = ("block size", "warps", "blocks", "registers", "shared memory", "barriers")


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def _carveout_at_least(spec: DeviceSpec, nbytes: int) -> int | None:
    """The smallest shared-memory configuration holding ``nbytes``, or None
    when the SM has no configurations or none is large enough."""
    if not spec.smem_carveouts_kib:
        return None
    for kib in sorted(spec.smem_carveouts_kib):
        if kib * 1024 >= nbytes:
            return kib * 1024
    return None


@dataclass(frozen=True)
class Occupancy:
    """The model's answer for one (device, kernel resources, launch) point.

    ``limits`` maps each resource to the blocks per SM it alone allows (None:
    it sets no limit); ``blocks_per_sm`` is their minimum and ``limiters`` the
    resources that reach it."""
    spec: DeviceSpec
    regs_per_thread: int
    block_threads: int
    dynamic_smem: int
    static_smem: int
    barriers: int
    carveout: int | None              # shared-memory preference in percent; None: the default
    opt_in: bool
    kernel_max_threads: int | None
    blocks_per_sm: int
    warps_per_block: int
    limits: dict
    limiters: tuple
    regs_per_block: int               # registers allocated to one block
    smem_per_block: int               # shared memory allocated to one block, reservation included
    smem_per_sm: int                  # shared memory the calculation divided (carveout)
    reason: str = ""                  # why a block cannot run at all, when it cannot

    @property
    def max_warps(self) -> int:
        return self.spec.max_warps_per_sm

    @property
    def active_warps(self) -> int:
        return self.blocks_per_sm * self.warps_per_block

    @property
    def occupancy(self) -> float:
        return self.active_warps / self.max_warps

    @property
    def limiter(self) -> str:
        return self.limiters[0]

    @property
    def carveout_used(self) -> int | None:
        """The smallest shared-memory configuration that holds the resident
        blocks: what the SM is set to, the rest of the array staying L1."""
        if self.blocks_per_sm == 0:
            return None
        needed = _carveout_at_least(self.spec, self.blocks_per_sm * self.smem_per_block)
        if needed is None or self.carveout is None:
            return needed
        return max(needed, self.smem_per_sm)   # a preference sets a floor

    def _with(self, **changes) -> "Occupancy":
        args = dict(regs_per_thread=self.regs_per_thread, block_threads=self.block_threads,
                    smem_per_block_dynamic=self.dynamic_smem, static_smem=self.static_smem,
                    barriers=self.barriers, carveout=self.carveout, opt_in=self.opt_in,
                    max_threads_per_block=self.kernel_max_threads)
        args.update(changes)
        return model(self.spec, **args)

    # ---------------------------------------------------------------- advice
    def advice(self) -> list[str]:
        """For each limit that binds: what would raise the blocks per SM."""
        if self.blocks_per_sm == 0:
            return [self._advise_block_size()]
        if self.active_warps == self.max_warps:
            return [self._advise_warps()]
        out = []
        for lim in self.limiters:
            text = {"block size": self._advise_block_size, "warps": self._advise_warps,
                    "blocks": self._advise_blocks, "registers": self._advise_registers,
                    "shared memory": self._advise_smem, "barriers": self._advise_barriers}[lim]()
            if text:
                out.append(text)
        return out

    def _ties(self, lim) -> str:
        others = [x for x in self.limiters if x != lim]
        if not others:
            return ""
        return f" ({' and '.join(others)} also hold{'s' * (len(others) == 1)} it at " \
               f"{self.blocks_per_sm}: change both)"

    def _relief(self, lim, first_change, first_text, best_change, best_text) -> str:
        """Text for the smallest change that lifts ``lim``'s own count, and the
        change that takes occupancy as far as the other limits allow."""
        b = self.blocks_per_sm
        first = first_change()
        if first is None:
            return self._ties(lim)
        moved = first[1]
        alone = moved.limits[lim]
        if moved.blocks_per_sm == b:
            return f"; {first_text(first[0])} would allow {alone}" + self._ties(lim)
        text = f"; {first_text(first[0])} would give {moved.blocks_per_sm}"
        best = best_change()
        if best is not None and best[1].blocks_per_sm > moved.blocks_per_sm:
            text += f", {best_text(best[0])} would give {best[1].blocks_per_sm}"
        return text

    def _advise_registers(self) -> str:
        b = self.blocks_per_sm
        head = f"registers bind: {b} block{'s' * (b != 1)}"
        if self.regs_per_thread <= 1:
            return head
        top = self._with(regs_per_thread=0).blocks_per_sm

        def first():
            for r in range(self.regs_per_thread - 1, 0, -1):
                o = self._with(regs_per_thread=r)
                if o.limits["registers"] > b:
                    return r, o
            return None

        def best():
            for r in range(self.regs_per_thread - 1, 0, -1):
                o = self._with(regs_per_thread=r)
                if o.blocks_per_sm >= top:
                    return r, o
            return None

        text = head + self._relief("registers", first, lambda r: f"<= {r} registers/thread",
                                   best, lambda r: f"<= {r}")
        return text + ("" if text == head or "(" in text[len(head):] else
                       " (--maxrregcount or __launch_bounds__(threads, min_blocks))")

    def _advise_smem(self) -> str:
        b = self.blocks_per_sm
        head = (f"shared memory binds: {b} block{'s' * (b != 1)} of "
                f"{format_size(self.smem_per_block)} allocated")
        if self.smem_per_block and self.spec.smem_reserved_per_block:
            head += f" (incl. {format_size(self.spec.smem_reserved_per_block)} reserved)"
        if self._with(smem_per_block_dynamic=0).limits["shared memory"] in (None,) or \
                self._with(smem_per_block_dynamic=0).limits["shared memory"] <= b:
            return head + (f"; the {format_size(self.static_smem)} of static shared memory "
                           "alone allows no more" if self.static_smem else "") + \
                self._ties("shared memory")
        top = self._with(smem_per_block_dynamic=0).blocks_per_sm

        def first():
            d = _largest_dynamic_smem(self, b + 1, own=True)
            return None if d is None else (d, self._with(smem_per_block_dynamic=d))

        def best():
            d = _largest_dynamic_smem(self, top)
            return None if d is None else (d, self._with(smem_per_block_dynamic=d))

        return head + self._relief("shared memory", first,
                                   lambda d: f"<= {format_size(d)} dynamic/block", best,
                                   lambda d: f"<= {format_size(d)}")

    def _advise_warps(self) -> str:
        w = self.warps_per_block
        if self.active_warps == self.max_warps:
            return (f"warps bind: all {self.max_warps} warp slots are in use (100%); "
                    "occupancy cannot go higher")
        text = (f"warps bind: {self.blocks_per_sm} blocks of {w} warp{'s' * (w != 1)} fill "
                f"{self.active_warps} of {self.max_warps} warp slots")
        if self.block_threads % self.spec.warp_size:
            idle = w * self.spec.warp_size - self.block_threads
            text += f"; {idle} lanes of the last warp of each block idle"
        better = []
        for cand in range(1, self.spec.max_threads_per_block // self.spec.warp_size + 1):
            if self.max_warps % cand == 0:
                o = self._with(block_threads=cand * self.spec.warp_size)
                if o.occupancy > self.occupancy:
                    better.append((abs(cand - w), cand, o))
        if better:
            _, cand, o = min(better)
            text += (f"; blocks of {cand * self.spec.warp_size} threads would give "
                     f"{o.blocks_per_sm} blocks ({o.occupancy:.1%})")
        return text + self._ties("warps")

    def _advise_blocks(self) -> str:
        text = (f"blocks bind: at most {self.spec.max_blocks_per_sm} blocks/SM of "
                f"{self.warps_per_block} warp{'s' * (self.warps_per_block != 1)} fill "
                f"{self.active_warps} of {self.max_warps} warp slots")
        need = -(-self.max_warps // self.spec.max_blocks_per_sm)
        if need > self.warps_per_block:
            o = self._with(block_threads=need * self.spec.warp_size)
            if o.occupancy > self.occupancy:
                text += (f"; blocks of {need * self.spec.warp_size} threads would give "
                         f"{o.occupancy:.1%}")
        return text + self._ties("blocks")

    def _advise_barriers(self) -> str:
        b = self.blocks_per_sm
        text = (f"named barriers bind: each block holds {self.barriers} of the "
                f"{self.spec.barrier_slots_per_sm} barrier slots per SM")
        for n in range(self.barriers - 1, 0, -1):
            o = self._with(barriers=n)
            if o.blocks_per_sm > b:
                return text + f"; using <= {n} barrier ids would give {o.blocks_per_sm}"
        return text + self._ties("barriers")

    def _advise_block_size(self) -> str:
        ways = []
        fits = next((t for t in range(self.block_threads - 1, 0, -1)
                     if t % self.spec.warp_size == 0 and self._with(block_threads=t).blocks_per_sm),
                    None)
        if fits:
            ways.append(f"blocks of <= {fits} threads")
        if self.limits.get("registers") == 0:
            r = next((r for r in range(min(self.regs_per_thread, self.spec.max_regs_per_thread),
                                       0, -1) if self._with(regs_per_thread=r).blocks_per_sm), None)
            if r:
                ways.append(f"<= {r} registers/thread")
        if self.limits.get("shared memory") == 0:
            d = _largest_dynamic_smem(self, 1)
            if d is not None:
                ways.append(f"<= {format_size(d)} of dynamic shared memory")
        text = f"block size: {self.reason}"
        return text + (f"; would fit with {' or '.join(ways)}" if ways else "")

    # ---------------------------------------------------------------- table
    def table(self) -> str:
        s = self.spec
        w = self.warps_per_block
        rows = [("warps", f"{w} warp{'s' * (w != 1)} ({self.block_threads} threads)",
                 f"{s.max_warps_per_sm} warps")]
        if self.regs_per_thread:
            rows.append(("registers", f"{self.regs_per_block} regs ({self.regs_per_thread}/thread)",
                         f"{s.regs_per_sm}"))
        else:
            rows.append(("registers", "not counted", f"{s.regs_per_sm}"))
        smem_use = format_size(self.smem_per_block)
        parts = []
        if self.static_smem:
            parts.append(f"{format_size(self.static_smem)} static")
        if self.dynamic_smem:
            parts.append(f"{format_size(self.dynamic_smem)} dynamic")
        if s.smem_reserved_per_block:
            parts.append(f"{format_size(s.smem_reserved_per_block)} reserved")
        if parts:
            smem_use += f" = {' + '.join(parts)}"
        rows.append(("shared memory", smem_use, format_size(self.smem_per_sm)))
        rows.append(("blocks", "1 block", f"{s.max_blocks_per_sm} blocks"))
        if self.limits.get("barriers") is not None:
            rows.append(("barriers", f"{self.barriers} ids", f"{s.barrier_slots_per_sm} slots"))
        head = ("limit", "per block", "per SM", "blocks/SM", "")
        body = []
        for name, use, cap in rows:
            n = self.limits.get(name)
            mark = "<- binds" if name in self.limiters else ""
            body.append((name, use, cap, "-" if n is None else str(n), mark))
        widths = [max(len(r[i]) for r in [head] + body) for i in range(4)]
        lines = []
        for r in [head] + body:
            lines.append(f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:>{widths[2]}}  "
                         f"{r[3]:>{widths[3]}}  {r[4]}".rstrip())
        if self.reason:
            lines.append(f"block size: {self.reason}")
        lines.append(f"=> {self.blocks_per_sm} blocks/SM x {w} warp{'s' * (w != 1)} = "
                     f"{self.active_warps} of "
                     f"{self.max_warps} warps: occupancy {self.occupancy:.1%} "
                     f"(limited by {self.limiter})")
        cv = self.carveout_used
        if cv is not None and self.spec.smem_carveouts_kib:
            lines.append(f"shared-memory carveout that holds them: {format_size(cv)} of "
                         f"{format_size(self.spec.smem_per_sm)}")
        lines += [f"- {a}" for a in self.advice()]
        return "\n".join(lines)

    def __str__(self):
        return self.table()


def model(spec: DeviceSpec, regs_per_thread: int, block_threads: int,
          smem_per_block_dynamic: int = 0, static_smem: int = 0, *, barriers: int = 0,
          carveout: int | None = None, opt_in: bool = True,
          max_threads_per_block: int | None = None) -> Occupancy:
    """Blocks per SM for a kernel using ``regs_per_thread`` registers (0: do
    not count registers), ``static_smem`` bytes of static and
    ``smem_per_block_dynamic`` bytes of dynamic shared memory and
    ``barriers`` named-barrier ids, launched with ``block_threads`` threads.

    ``carveout``: the kernel's preferred shared-memory carveout in percent
    of the largest (None: no preference, the driver sizes it to fit).
    ``opt_in``: the kernel may use dynamic shared memory above
    ``spec.smem_per_block`` (``drvgemm.launch`` opts in on demand).
    ``max_threads_per_block``: the kernel's own limit (__launch_bounds__)."""
    for nm, v in (("regs_per_thread", regs_per_thread), ("smem_per_block_dynamic",
                  smem_per_block_dynamic), ("static_smem", static_smem), ("barriers", barriers)):
        if not isinstance(v, int) or v < 0:
            raise ValueError(f"{nm} must be an integer >= 0, not {v!r}")
    if not isinstance(block_threads, int) or block_threads <= 0:
        raise ValueError(f"block_threads must be a positive integer, not {block_threads!r}")
    if carveout is not None and not 0 <= carveout <= 100:
        raise ValueError(f"carveout is a percentage 0..100 (or None), not {carveout!r}")

    ws = spec.warp_size
    warps = _round_up(-(-block_threads // ws), spec.warp_alloc_granularity)
    reasons = []
    limits: dict[str, int | None] = {}

    # Warp slots.
    if block_threads > spec.max_threads_per_block:
        limits["warps"] = 0
        reasons.append(f"{block_threads} threads exceed the {spec.max_threads_per_block} "
                       "a block may have")
    else:
        limits["warps"] = spec.max_warps_per_sm // warps
    if max_threads_per_block is not None and block_threads > max_threads_per_block:
        reasons.append(f"{block_threads} threads exceed the kernel's own limit of "
                       f"{max_threads_per_block} (__launch_bounds__ / .maxntid)")

    # Block slots.
    limits["blocks"] = spec.max_blocks_per_sm

    # Registers: each warp gets a multiple of the allocation unit, from one
    # of the partitions of the register file (one per warp scheduler); a
    # block is only admitted if its warps, spread evenly over the
    # partitions, fit the per-block register limit.
    regs_block = 0
    if regs_per_thread == 0:
        limits["registers"] = None
    else:
        per_warp = _round_up(regs_per_thread * ws, spec.reg_alloc_unit)
        regs_block = per_warp * warps
        spread = per_warp * _round_up(warps, spec.reg_partitions)
        if regs_per_thread > spec.max_regs_per_thread:
            limits["registers"] = 0
            reasons.append(f"{regs_per_thread} registers/thread exceed the "
                           f"{spec.max_regs_per_thread} a thread may have")
        elif regs_block > spec.regs_per_block or spread > spec.regs_per_block:
            limits["registers"] = 0
            reasons.append(f"{warps} warps x {per_warp} registers need {max(regs_block, spread)} "
                           f"registers (counted over {spec.reg_partitions} partitions); a block "
                           f"may have {spec.regs_per_block}")
        else:
            per_partition = (spec.regs_per_sm // spec.reg_partitions) // per_warp
            limits["registers"] = per_partition * spec.reg_partitions // warps

    # Shared memory: static + dynamic + the driver's per-block reservation,
    # rounded up to the allocation unit, divided into the carveout.
    used = static_smem + smem_per_block_dynamic + spec.smem_reserved_per_block
    alloc = _round_up(used, spec.smem_alloc_unit)
    cap = (spec.smem_per_block_optin if opt_in else spec.smem_per_block) \
        + spec.smem_reserved_per_block
    preferred = spec.smem_per_sm if carveout is None else carveout * spec.smem_per_sm // 100
    aligned = _carveout_at_least(spec, preferred)
    if aligned is not None:
        preferred = aligned
    if preferred >= alloc:
        smem_sm = preferred
    else:
        # A preference smaller than one block is overridden: the SM is set
        # to the smallest configuration that holds one block.
        smem_sm = _carveout_at_least(spec, alloc) or spec.smem_per_sm
    if alloc > cap:
        limits["shared memory"] = 0
        how = "after opt-in" if opt_in else "without opt-in"
        reasons.append(f"{format_size(alloc)} of shared memory per block (with "
                       f"{format_size(spec.smem_reserved_per_block)} reserved) exceed the "
                       f"{format_size(cap)} a block may have {how}")
    elif alloc == 0:
        limits["shared memory"] = None
    else:
        limits["shared memory"] = smem_sm // alloc

    # Named-barrier slots (sm_90+).
    if spec.barrier_slots_per_sm and barriers > 0:
        limits["barriers"] = spec.barrier_slots_per_sm // barriers
        if limits["barriers"] == 0:
            reasons.append(f"{barriers} barrier ids exceed the {spec.barrier_slots_per_sm} "
                           "slots of an SM")
    else:
        limits["barriers"] = None

    limits["block size"] = 0 if reasons else None
    blocks = min(v for v in limits.values() if v is not None)
    limiters = tuple(n for n in _LIMIT_ORDER if limits.get(n) == blocks)
    return Occupancy(spec=spec, regs_per_thread=regs_per_thread, block_threads=block_threads,
                     dynamic_smem=smem_per_block_dynamic, static_smem=static_smem,
                     barriers=barriers, carveout=carveout, opt_in=opt_in,
                     kernel_max_threads=max_threads_per_block, blocks_per_sm=blocks,
                     warps_per_block=warps, limits=limits, limiters=limiters,
                     regs_per_block=regs_block, smem_per_block=alloc, smem_per_sm=smem_sm,
                     reason="; ".join(reasons))


def _largest_dynamic_smem(point: Occupancy, blocks: int, own: bool = False) -> int | None:
    """The most dynamic shared memory per block at which ``point`` still
    reaches ``blocks`` blocks per SM (``own``: counting the shared-memory
    limit alone), None when not even none does. Blocks per SM never rise with
    shared memory, so a bisection finds the edge exactly."""
    def count(d):
        o = point._with(smem_per_block_dynamic=d)
        if own:
            n = o.limits["shared memory"]
            return math.inf if n is None else n
        return o.blocks_per_sm

    if count(0) < blocks:
        return None
    lo, hi = 0, point.spec.smem_per_block_optin + point.spec.smem_per_sm
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(mid) >= blocks:
            lo = mid
        else:
            hi = mid - 1
    return lo


def available_dynamic_smem(spec: DeviceSpec, regs_per_thread: int, block_threads: int,
                           blocks: int, static_smem: int = 0, **kw) -> int | None:
    """The most dynamic shared memory a block may ask for and still have
    ``blocks`` blocks per SM resident (None: unreachable at any size)."""
    if blocks <= 0:
        raise ValueError(f"blocks must be positive, not {blocks}")
    base = model(spec, regs_per_thread, block_threads, 0, static_smem, **kw)
    return _largest_dynamic_smem(base, blocks)


def max_potential_block_size(spec: DeviceSpec, regs_per_thread: int,
                             smem_per_block_dynamic: int = 0, static_smem: int = 0, *,
                             max_threads_per_block: int | None = None, **kw) -> tuple[int, int]:
    """(smallest grid that fills every SM, block size) for the block size that
    keeps the most threads resident per SM; the larger block wins a tie, as
    in the driver's search."""
    limit = min(spec.max_threads_per_block, max_threads_per_block or spec.max_threads_per_block)
    best_threads = best_block = best_blocks = 0
    aligned = _round_up(limit, spec.warp_size)
    while aligned > 0:
        t = min(limit, aligned)
        o = model(spec, regs_per_thread, t, smem_per_block_dynamic, static_smem,
                  max_threads_per_block=max_threads_per_block, **kw)
        if o.blocks_per_sm * t > best_threads:
            best_threads, best_block, best_blocks = o.blocks_per_sm * t, t, o.blocks_per_sm
        if best_threads == spec.max_threads_per_sm:
            break
        aligned -= spec.warp_size
    return best_blocks * (spec.sm_count or 1), best_block


# --------------------------------------------------------------------------
# a compiled kernel: the model, and the driver when there is a GPU
# --------------------------------------------------------------------------
def kernel_max_threads(ptx: str, entry: str) -> int | None:
    """The block-size limit a kernel declares in its PTX (.maxntid / .reqntid,
    what __launch_bounds__ compiles to), or None."""
    m = re.search(r"\.entry\s+" + re.escape(entry) + r"(?![\w$])\s*", ptx)
    if not m:
        return None
    start = m.end()
    if ptx.startswith("(", start):
        start = ptx.find(")", start)
    brace = ptx.find("{", start)
    head = ptx[start:brace if brace >= 0 else None]
    d = re.search(r"\.(?:maxntid|reqntid)\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?", head)
    if not d:
        return None
    return math.prod(int(x) for x in d.groups() if x)


def block_threads(block) -> int:
    """Threads in a block given as an int or a 1-3 tuple (checked)."""
    try:
        dims = (block,) if isinstance(block, int) else tuple(block)
    except TypeError:           # a float, None, ...: not a block
        dims = ()
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, int) and d > 0 for d in dims):
        raise ValueError(f"block must be a positive int or a tuple of 1-3 positive ints, "
                         f"not {block!r}")
    for axis, d, most in zip("xyz", dims, (1024, 1024, 64)):
        if d > most:
            raise ValueError(f"block.{axis} = {d} exceeds the {most} a block may have")
    return math.prod(dims)


# --------------------------------------------------------------------------
# sizes
# --------------------------------------------------------------------------
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmM]?)(?:i?[bB])?\s*$")


def parse_size(text) -> int:
    """'48K', '48KiB', '48KB', '1.5M', '1000', 1000 -> bytes (K = 1024)."""
    if isinstance(text, int):
        if text < 0:
            raise ValueError(f"a size must be >= 0, not {text}")
        return text
    m = _SIZE_RE.match(str(text))
    if not m:
        raise ValueError(f"{text!r} is not a size: write bytes (1000) or 48K / 48KiB / 1M")
    value = float(m.group(1)) * {"": 1, "k": 1024, "m": 1024 * 1024}[m.group(2).lower()]
    if value != int(value):
        raise ValueError(f"{text!r} is not a whole number of bytes")
    return int(value)


def format_size(n: int | None) -> str:
    if n is None:
        return "-"
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n:,} B"


