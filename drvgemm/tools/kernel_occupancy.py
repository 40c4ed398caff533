"""``drvgemm.occupancy(kernel, block, smem)``: the occupancy model's answer
for a compiled kernel (drvgemm/analysis/occupancy.py) side by side with the
driver's own (cuOccupancyMaxActiveBlocksPerMultiprocessor and friends) when
a GPU is present. The two must agree exactly."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ..analysis.occupancy import (SPECS, DeviceSpec, Occupancy, available_dynamic_smem,
                                  block_threads, format_size, get_spec, kernel_max_threads,
                                  max_potential_block_size, model, parse_size)
from ..runtime import driver
from ..runtime.errors import CudaError

__all__ = ["KernelOccupancy", "occupancy"]


@dataclass
class KernelOccupancy:
    """``drvgemm.occupancy``'s answer: the model's explanation and, when a GPU
    is present, the driver's own figures for the same launch."""
    kernel: str
    model: Occupancy
    driver_blocks_per_sm: int | None = None
    driver_available_dynamic_smem: int | None = None
    driver_potential_block_size: tuple | None = None
    driver_error: str | None = None
    source: str = "model"             # "driver" when the driver answered
    model_available_dynamic_smem: int | None = None
    model_potential_block_size: tuple | None = None
    model_only: str = "no GPU"        # why the driver was not asked, when it was not
    notes: list = field(default_factory=list)
    cluster: tuple | None = None      # the cluster shape asked about, if any
    driver_active_clusters: int | None = None   # cuOccupancyMaxActiveClusters (whole GPU)

    @property
    def blocks_per_sm(self) -> int:
        if self.driver_blocks_per_sm is not None:
            return self.driver_blocks_per_sm
        return self.model.blocks_per_sm

    @property
    def warps_per_block(self) -> int:
        return self.model.warps_per_block

    @property
    def active_warps(self) -> int:
        return self.blocks_per_sm * self.model.warps_per_block

    @property
    def max_warps(self) -> int:
        return self.model.max_warps

    @property
    def occupancy(self) -> float:
        return self.active_warps / self.max_warps

    @property
    def limiter(self) -> str:
        return self.model.limiter

    @property
    def limits(self) -> dict:
        return self.model.limits

    def advice(self) -> list[str]:
        return self.model.advice()

    @property
    def agrees(self) -> bool | None:
        """Whether the driver and the model give the same blocks per SM
        (None when there was no driver to ask)."""
        if self.driver_blocks_per_sm is None:
            return None
        return self.driver_blocks_per_sm == self.model.blocks_per_sm

    def __str__(self):
        m = self.model
        res = (f"{m.regs_per_thread} registers/thread, {format_size(m.static_smem)} static "
               f"shared memory")
        if m.barriers:
            res += f", {m.barriers} barrier id{'s' * (m.barriers != 1)}"
        if m.kernel_max_threads:
            res += f", at most {m.kernel_max_threads} threads/block"
        lines = [f"{self.kernel} on {m.spec.name}: block of {m.block_threads} threads, "
                 f"{format_size(m.dynamic_smem)} dynamic shared memory", f"kernel: {res}", "",
                 m.table(), ""]
        if self.driver_blocks_per_sm is not None:
            verdict = "agrees" if self.agrees else "DISAGREES with the model"
            lines.append(f"driver: {self.driver_blocks_per_sm} blocks/SM ({verdict})")
        elif self.driver_error:
            lines.append(f"driver: {self.driver_error}")
        else:
            lines.append(f"{self.model_only}: the numbers are the model's ({m.spec.name} spec)")
        if self.model_available_dynamic_smem is not None:
            d = self.driver_available_dynamic_smem
            lines.append(f"dynamic shared memory a block may have at {m.blocks_per_sm} "
                         f"blocks/SM: {format_size(self.model_available_dynamic_smem)}"
                         + (f" (driver: {format_size(d)})" if d is not None else ""))
        if self.model_potential_block_size:
            grid, blk = self.model_potential_block_size
            d = self.driver_potential_block_size
            if blk:
                lines.append(f"block size with the most resident threads: {blk} (grid of "
                             f"{grid} fills the GPU)"
                             + (f" (driver: {d[1]}, grid {d[0]})" if d else ""))
            else:
                lines.append(f"no block size fits with {format_size(m.dynamic_smem)} of dynamic "
                             "shared memory")
        if self.cluster is not None:
            cx, cy, cz = self.cluster
            got = ("not asked (no GPU)" if self.driver_active_clusters is None
                   else f"{self.driver_active_clusters} co-resident on the GPU "
                        f"({self.driver_active_clusters * cx * cy * cz} blocks)")
            lines.append(f"clusters of {cx}x{cy}x{cz} blocks: {got}")
        lines += self.notes
        return "\n".join(lines)


def _same_device(a: DeviceSpec, b: DeviceSpec) -> bool:
    """Equal in every resource (names and SM counts aside)."""
    return dataclasses.replace(a, name="", sm_count=None) == \
        dataclasses.replace(b, name="", sm_count=None)


def occupancy(kernel, block, smem=0, *, spec: DeviceSpec | str | None = None,
              carveout: int | None = None, cluster=None) -> KernelOccupancy:
    """Blocks per SM, warps, occupancy and the binding limit of ``kernel``
    (a compiled ``drvgemm.Kernel``) launched with ``block`` (int or tuple)
    and ``smem`` bytes of dynamic shared memory (an int, or a size like
    "48K"). The model uses the device's properties when a GPU is present
    (else ``spec``, a DeviceSpec or a catalogue name such as "A100", by
    default the H200's); the driver is asked too when
    there is a GPU and ``spec`` is not given, or is that same device.
    ``cluster`` (x, y, z): also ask cuOccupancyMaxActiveClusters how many
    thread-block clusters of that shape can be resident at once.

    The kernel's own dynamic shared-memory limit is left as it was: the
    driver is asked with the limit raised to what a block may have (as
    ``drvgemm.launch`` would raise it on demand), and the limit is put back."""
    threads = block_threads(block)
    if isinstance(spec, str):
        spec = get_spec(spec)       # ValueError naming the built-in specs
    smem = parse_size(smem) if isinstance(smem, str) else int(smem)
    if smem < 0:
        raise ValueError(f"smem must be >= 0, not {smem}")
    res = kernel.resources
    if res is None:
        raise ValueError(f"{kernel.entry} has no ptxas resource report (registers, shared "
                         "memory) to compute occupancy from")
    gpu = driver.has_gpu()
    ask_driver = gpu
    if spec is None:
        spec = DeviceSpec.from_device(driver.device()) if gpu else SPECS["H200"]
    elif gpu:
        ask_driver = _same_device(DeviceSpec.from_device(driver.device()), spec)
    model_only = "no GPU" if not gpu else \
        f"the {spec.name} spec is not this GPU" if not ask_driver else \
        "a carveout preference was given (the driver is asked for the default)"
    max_threads = kernel_max_threads(kernel.ptx, kernel.entry)
    kw = dict(barriers=res.barriers, carveout=carveout, max_threads_per_block=max_threads)
    point = model(spec, res.registers, threads, smem, res.static_smem, **kw)
    out = KernelOccupancy(kernel=getattr(kernel, "name", None) or kernel.entry, model=point,
                          model_only=model_only)
    if point.blocks_per_sm:
        out.model_available_dynamic_smem = available_dynamic_smem(
            spec, res.registers, threads, point.blocks_per_sm, res.static_smem, **kw)
    out.model_potential_block_size = max_potential_block_size(
        spec, res.registers, smem, res.static_smem, **kw)
    if ask_driver and carveout is None:
        try:
            fn = kernel.function
            # The driver answers for the kernel's current opt-in limit, the
            # model for the launch that would happen: ask at the most a block
            # may have, then leave the kernel as it was.
            with kernel.dynamic_smem_opt_in(spec.smem_per_block_optin - kernel.static_smem):
                out.driver_blocks_per_sm = driver.occupancy_max_active_blocks(fn, threads, smem)
                out.source = "driver"
                if out.driver_blocks_per_sm:
                    out.driver_available_dynamic_smem = driver.occupancy_available_dynamic_smem(
                        fn, out.driver_blocks_per_sm, threads)
                out.driver_potential_block_size = tuple(
                    driver.occupancy_max_potential_block_size(fn, smem))
        except (CudaError, ValueError) as e:   # ValueError: compiled for another arch
            out.driver_error = str(e).splitlines()[0]
    if cluster is not None:
        c = tuple(cluster) + (1,) * (3 - len(tuple(cluster)))
        out.cluster = c
        if ask_driver:
            blk = tuple(block) + (1,) * (3 - len(tuple(block))) if not isinstance(block, int) \
                else (block, 1, 1)
            try:
                with kernel.dynamic_smem_opt_in(smem):
                    out.driver_active_clusters = driver.occupancy_max_active_clusters(
                        kernel.function, c, blk, smem, c)
            except CudaError as e:
                out.notes.append(f"cuOccupancyMaxActiveClusters: {str(e).splitlines()[0]}")
    return out
