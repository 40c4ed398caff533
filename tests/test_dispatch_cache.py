"""The per-call plan cache of gemm(), with a stand-in for the GPU: the
launches are recorded instead of enqueued, so what each call would launch
(kernel, grid, arguments, stream) can be checked with no device.

A repeat call with the same signature is a hit and launches the same thing
with its own pointers; a new alignment class, stream, shape, dtype, C type,
beta-zero-ness or contiguity is a miss that goes through every check again;
nothing the checks reject is cached."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import drvgemm
from drvgemm.ladders.gemm import dispatch, plan as planning
from drvgemm.runtime import driver, dtypes
from drvgemm.runtime.driver import DeviceArray


class FakeKernel:
    resources = None    # no ptxas report: rung 20's register-budget check is skipped

    def __init__(self, rung, key):
        self.rung, self.key = rung, key
        self.name = f"fake:{rung.name}/aligned={int(key[1])}/out16={int(key[2])}"


@pytest.fixture
def gpu(monkeypatch):
    """A stand-in device: compiles become FakeKernels, launches are recorded,
    allocations get fresh 256-aligned fake addresses."""
    launches = []
    kernels = {}
    addresses = itertools.count(0x7_0000_0000, 0x100_0000)

    def rung_kernel(r, aligned, arch=None, *, narrow_output=False, split_k=False):
        key = (r.name, bool(aligned), bool(narrow_output), bool(split_k))
        k = kernels.setdefault(key, FakeKernel(r, key))
        k.split_k = bool(split_k)
        return k

    def fake_launch(kernel, grid, block, args, *, smem=0, stream=None, cluster=None):
        launches.append(dict(kernel=kernel, grid=grid, block=block, args=tuple(args),
                             smem=smem, stream=stream))

    def ensure(self, nbytes, stream):
        if nbytes > self.nbytes:
            self.ptr, self.nbytes = next(addresses), nbytes

    monkeypatch.setattr(driver, "has_gpu", lambda: True)
    monkeypatch.setattr(driver, "empty",
                        lambda shape, dtype=np.float32: DeviceArray(shape, dtype,
                                                                    ptr=next(addresses),
                                                                    owner=False))
    monkeypatch.setattr(dispatch, "_target", lambda: planning.target("H200"))
    monkeypatch.setattr(dispatch, "tuned_file", lambda: None)   # no drvgemm tune winners
    monkeypatch.setattr(dispatch, "rung_kernel", rung_kernel)
    monkeypatch.setattr(dispatch, "launch", fake_launch)
    monkeypatch.setattr(dispatch._Workspace, "ensure", ensure)
    # the split-K reduction (rungs 08 and 20) compiles through split_k and sizes
    # its grid by the device's SMs
    from runtime_fakes import H200
    from drvgemm.ladders.gemm import split_k
    monkeypatch.setattr(driver, "device", lambda *a: H200)
    monkeypatch.setattr(split_k, "compile_once", lambda src, entry, **kw: f"fake:{entry}")
    from drvgemm.ladders.gemm import staging     # rung 20's staging copy, likewise
    monkeypatch.setattr(staging, "compile_once", lambda src, entry, **kw: f"fake:{entry}")
    dispatch.clear_plan_cache()
    yield launches
    dispatch.clear_plan_cache()


def dev(shape, dtype=np.float32, ptr=0x1000_0000):
    return DeviceArray(shape, dtype, ptr=ptr, owner=False)


BF16 = dtypes.bf16()


def test_same_call_twice_is_a_hit_with_the_same_launch(gpu):
    a, b, c = dev((16, 64)), dev((64, 256), ptr=0x2000_0000), dev((16, 256), ptr=0x3000_0000)
    drvgemm.gemm(a, b, c)
    drvgemm.gemm(a, b, c)
    info = dispatch.plan_cache_info()
    assert (info["misses"], info["hits"], info["size"]) == (1, 1, 1)
    assert len(gpu) == 2 and gpu[0] == gpu[1]
    first = gpu[0]
    assert first["kernel"].rung.name == "30_small_m_fp32"
    assert first["args"][:3] == (a.ptr, b.ptr, c.ptr) and first["stream"] is None


def test_new_pointers_of_the_same_class_reuse_the_plan(gpu):
    a, b, c = dev((16, 64)), dev((64, 256), ptr=0x2000_0000), dev((16, 256), ptr=0x3000_0000)
    drvgemm.gemm(a, b, c, alpha=2.0)
    a2, c2 = dev((16, 64), ptr=0x5000_0010), dev((16, 256), ptr=0x6000_0000)
    drvgemm.gemm(a2, b, c2, alpha=3.0)
    assert dispatch.plan_cache_info()["hits"] == 1
    assert gpu[1]["kernel"] is gpu[0]["kernel"]
    assert gpu[1]["args"][:3] == (a2.ptr, b.ptr, c2.ptr)
    assert gpu[1]["args"][8] == 3.0 and gpu[0]["args"][8] == 2.0   # alpha: the call's own


def test_another_alignment_class_is_a_miss_and_another_instantiation(gpu):
    # rung 30 has an ALIGNED=0 build (rung 20 stages misaligned operands instead)
    b = dev((64, 4096), BF16, ptr=0x2000_0000)
    kw = {"kernel": "30_small_m_bf16"}
    drvgemm.gemm(dev((8, 64), BF16), b, dev((8, 4096), ptr=0x3000_0000), **kw)
    drvgemm.gemm(dev((8, 64), BF16, ptr=0x1000_0002), b, dev((8, 4096), ptr=0x3000_0000), **kw)
    info = dispatch.plan_cache_info()
    assert info["misses"] == 2 and info["hits"] == 0
    assert gpu[0]["kernel"].key[1] is True and gpu[1]["kernel"].key[1] is False


def test_another_stream_is_a_miss_and_launches_on_it(gpu):
    a, b, c = dev((4, 64)), dev((64, 128), ptr=0x2000_0000), dev((4, 128), ptr=0x3000_0000)
    drvgemm.gemm(a, b, c)
    drvgemm.gemm(a, b, c, stream=0x1234)
    drvgemm.gemm(a, b, c, stream=0x1234)
    info = dispatch.plan_cache_info()
    assert (info["misses"], info["hits"]) == (2, 1)
    assert [x["stream"] for x in gpu] == [None, 0x1234, 0x1234]


@pytest.mark.parametrize("change", ["shape", "dtype", "beta", "out_dtype", "kernel",
                                    "precision", "c"])
def test_any_other_property_is_a_miss(tma, change):
    a, b = dev((16, 64)), dev((64, 256), ptr=0x2000_0000)
    c = dev((16, 256), ptr=0x3000_0000)
    drvgemm.gemm(a, b, c)
    kw = {}
    if change == "shape":
        a, c = dev((15, 64)), dev((15, 256), ptr=0x3000_0000)
    elif change == "dtype":
        a, b = dev((16, 64), BF16), dev((64, 256), BF16, ptr=0x2000_0000)
    elif change == "beta":
        kw = {"beta": 1.0}
    elif change == "out_dtype":
        a, b = dev((16, 64), BF16), dev((64, 256), BF16, ptr=0x2000_0000)
        drvgemm.gemm(a, b, c)
        c = dev((16, 256), BF16, ptr=0x3000_0000)
    elif change == "kernel":
        kw = {"kernel": "08_warp_tiled"}
    elif change == "precision":
        kw = {"precision": "tf32"}
    elif change == "c":
        c = None
    before = dispatch.plan_cache_info()["misses"]
    drvgemm.gemm(a, b, c, **kw)
    info = dispatch.plan_cache_info()
    assert info["misses"] == before + 1 and info["hits"] == 0


def test_errors_are_never_cached(gpu):
    a, b = dev((16, 64)), dev((64, 256), ptr=0x2000_0000)
    for _ in range(2):
        with pytest.raises(ValueError, match="C must be 16x256"):
            drvgemm.gemm(a, b, dev((16, 255), ptr=0x3000_0000))
        with pytest.raises(ValueError, match="needs an input C"):
            drvgemm.gemm(a, b, beta=1.0)
        with pytest.raises(TypeError, match="alpha and beta"):
            drvgemm.gemm(a, b, dev((16, 256), ptr=0x3000_0000), alpha="x")
    assert dispatch.plan_cache_info()["size"] == 0 and not gpu


def test_split_k_gets_a_workspace_per_stream(gpu):
    a, b = dev((1, 4096), BF16), dev((4096, 4096), BF16, ptr=0x2000_0000)
    c = dev((1, 4096), ptr=0x3000_0000)
    drvgemm.gemm(a, b, c, kernel="30_small_m_bf16")
    drvgemm.gemm(a, b, c, stream=0x99, kernel="30_small_m_bf16")
    (x, y) = gpu
    splits = x["args"][12]
    assert splits > 1
    counters, work = x["args"][4], x["args"][3]
    assert counters and work > counters
    assert y["args"][4] != counters   # another stream, another workspace
    drvgemm.gemm(a, b, c, stream=0x99, kernel="30_small_m_bf16")
    assert gpu[2]["args"][4] == y["args"][4]


def test_a_folded_split_gets_its_counters_per_stream(tma):
    """Rung 20 folding a split in the kernel: the counters' head of the
    stream's workspace, the slices after it; another stream, another one."""
    from drvgemm.ladders.gemm import hopper
    a, b = dev((1, 4096), BF16), dev((4096, 4096), BF16, ptr=0x2000_0000)
    c = dev((1, 4096), ptr=0x3000_0000)
    drvgemm.gemm(a, b, c)
    drvgemm.gemm(a, b, c, stream=0x99)
    (x, y) = tma
    assert x["kernel"].rung.name == "20_tma_wgmma_bf16_16x64"
    assert x["args"][11] == 2                      # split 2, folded: one launch
    counters = x["args"][12]
    assert counters and x["args"][9] == counters + hopper.FOLD_COUNTER_BYTES
    assert y["args"][12] != counters and y["args"][9] == y["args"][12] + hopper.FOLD_COUNTER_BYTES
    drvgemm.gemm(a, b, c, stream=0x99)
    assert tma[2]["args"][12] == y["args"][12]


def test_c_none_gets_a_new_output_every_call(gpu):
    a, b = dev((16, 64)), dev((64, 256), ptr=0x2000_0000)
    c1 = drvgemm.gemm(a, b)
    c2 = drvgemm.gemm(a, b)
    assert dispatch.plan_cache_info()["hits"] == 1
    assert isinstance(c1, DeviceArray) and c1.shape == (16, 256) and c1.ptr != c2.ptr
    assert gpu[0]["args"][2] == c1.ptr and gpu[1]["args"][2] == c2.ptr


def test_empty_and_k_zero_calls(gpu):
    a, b, c = dev((0, 64)), dev((64, 8), ptr=0x2000_0000), dev((0, 8), ptr=0x3000_0000)
    assert drvgemm.gemm(a, b, c) is c and not gpu
    a, b, c = dev((4, 0)), dev((0, 8), ptr=0x2000_0000), dev((4, 8), ptr=0x3000_0000)
    assert drvgemm.gemm(a, b, c, beta=2.0) is c
    assert len(gpu) == 1
    args = gpu[0]["args"]
    k_at, beta_at = (7, 9) if gpu[0]["kernel"].rung.host == "small_m" else (5, 7)
    assert args[k_at] == 0 and args[beta_at] == 2.0


class FakeTorchTensor:
    """Enough of a torch.Tensor for the probe and the checked path."""
    __module__ = "torch.fake"

    def __init__(self, shape, dtype="torch.float32", ptr=0x1000_0000, contiguous=True):
        self.shape, self.dtype, self._ptr, self._contig = tuple(shape), dtype, ptr, contiguous
        self.is_cuda, self.device = True, "cuda:0"

    def data_ptr(self):
        return self._ptr

    def is_contiguous(self):
        return self._contig

    def get_device(self):
        return 0

    def stride(self):
        return (1, self.shape[0])


def test_torch_tensors_use_data_ptr_and_their_contiguity_is_checked(tma):
    gpu = tma
    a = FakeTorchTensor((16, 64))
    b = FakeTorchTensor((64, 256), ptr=0x2000_0000)
    c = FakeTorchTensor((16, 256), ptr=0x3000_0000)
    assert drvgemm.gemm(a, b, c) is c
    assert drvgemm.gemm(a, b, c) is c
    assert dispatch.plan_cache_info()["hits"] == 1
    assert gpu[1]["args"][:3] == (a._ptr, b._ptr, c._ptr)
    bad = FakeTorchTensor((16, 64), contiguous=False)
    for _ in range(2):
        with pytest.raises(ValueError, match="rows must be contiguous"):
            drvgemm.gemm(bad, b, c)
    bf = FakeTorchTensor((16, 64), "torch.bfloat16")
    bfb = FakeTorchTensor((64, 256), "torch.bfloat16", ptr=0x2000_0000)
    drvgemm.gemm(bf, bfb, c)
    assert gpu[-1]["kernel"].rung.precision == "bf16"


# ---------------------------------------------------------------------------
# Rung 20's binding (hopper.TmaBinding): new pointers of a cached signature
# are rebound without the checked path; what it launches must be exactly what
# the checked path (hopper.split_launches) builds for those pointers.
# ---------------------------------------------------------------------------
@pytest.fixture
def tma(gpu, monkeypatch):
    import struct
    from drvgemm.ladders.gemm import hopper
    from drvgemm.runtime import tensormap

    def encode(t):   # a stand-in map: its fields, so two maps differ where they should
        return struct.pack("<5Q", t.address, *t.dims, *t.strides, t.box[0]).ljust(128, b"\0")

    class Encoder:
        at = tensormap.MapEncoder.at

        def __init__(self, template):
            self.template = template

        def __call__(self, address):
            return self.at(address).param_bytes

    monkeypatch.setattr(tensormap.TensorMap, "_encode", encode)
    monkeypatch.setattr(hopper, "MapEncoder", Encoder)
    tensormap._MAP_CACHE.clear()
    yield gpu
    tensormap._MAP_CACHE.clear()


def _bytes(args):
    return tuple(getattr(a, "param_bytes", a) for a in args)


@pytest.mark.parametrize("m, n, k", [(512, 512, 512), (128, 128, 65536), (1000, 704, 896)])
def test_tma_binding_launches_what_the_checked_path_builds(tma, m, n, k):
    from drvgemm.ladders.gemm import hopper
    sets = [(dev((m, k), BF16, ptr=0x1000_0000 + i * 0x100_0000),
             dev((k, n), BF16, ptr=0x4000_0000 + i * 0x100_0000),
             dev((m, n), BF16, ptr=0x8000_0000 + i * 0x100_0000)) for i in range(3)]
    for a, b, c in sets + sets[:1]:
        drvgemm.gemm(a, b, c, alpha=1.5)
    info = dispatch.plan_cache_info()
    assert (info["misses"], info["hits"]) == (1, 3)
    p = drvgemm.plan(*sets[0], alpha=1.5)
    assert p.rung.host == "tma"
    per_call = len(tma) // 4
    folded = p.rung.host_side.split_in_kernel(p.rung, m, n, k, p.split, 132)
    assert per_call == (2 if p.split > 1 and not folded else 1)
    for i, (a, b, c) in enumerate(sets + sets[:1]):
        got = tma[i * per_call:(i + 1) * per_call]
        # the workspace: the slices start past the counters' head
        ws = got[0]["args"][9] - (hopper.FOLD_COUNTER_BYTES if p.split > 1 else 0)
        assert got[0]["args"][12] == (ws if folded else 0)
        want = hopper.split_launches(p.rung, got[0]["kernel"], a.ptr, b.ptr, c.ptr, m, n, k,
                                     1.5, 0.0, stream=0, narrow_output=True, split=p.split,
                                     workspace=ws)
        assert len(want) == per_call
        for g, (kern, cfg) in zip(got, want):
            assert (g["grid"], g["block"], g["smem"]) == (cfg.grid, cfg.block, cfg.smem)
            assert _bytes(g["args"]) == _bytes(cfg.args)
        assert got[0]["args"][3] == c.ptr


@pytest.mark.parametrize("m, n, k, staged", [(127, 8191, 131, "AB"), (1000, 700, 900, "AB"),
                                             (2048, 512, 515, "A")])
def test_tma_binding_stages_misaligned_operands_in_one_launch(tma, m, n, k, staged):
    """An operand whose rows are not whole 16 bytes goes through the
    binding's own padded buffer: each call launches the staging copy first
    (one launch for A and B), from that call's pointers into the same
    buffers, and the product's maps describe those buffers -- so replaying a
    call copies the operands' current data again."""
    import struct
    from drvgemm.runtime.tensormap import padded_pitch
    sets = [(dev((m, k), BF16, ptr=0x1000_0002 + i * 0x100_0000),
             dev((k, n), BF16, ptr=0x4000_0000 + i * 0x100_0000),
             dev((m, n), BF16, ptr=0x8000_0000 + i * 0x100_0000)) for i in range(3)]
    for a, b, c in sets + sets[:1]:
        drvgemm.gemm(a, b, c)
    assert dispatch.plan_cache_info()["hits"] == 3
    assert drvgemm.plan(*sets[0]).rung.host == "tma"
    per_call = len(tma) // 4
    dsts = None
    for i, (a, b, c) in enumerate(sets + sets[:1]):
        pad, main = tma[i * per_call], tma[i * per_call + 1]
        assert pad["kernel"] == "fake:pad_rows_2" and pad["grid"][1] == len(staged)
        want = {"A": (a.ptr, m, 2 * k), "B": (b.ptr, k, 2 * n)}
        got_dsts = []
        for j, name in enumerate(staged):
            src, dst, rows, width, pitch = pad["args"][5 * j:5 * j + 5]
            assert (src, rows, width) == want[name] and pitch == padded_pitch(width)
            assert dst % 16 == 0
            got_dsts.append(dst)
            slot = "AB".index(name)
            assert struct.unpack_from("<Q", _bytes(main["args"])[slot])[0] == dst
        assert dsts is None or got_dsts == dsts, "the staging buffers moved between calls"
        dsts = got_dsts
        if staged == "A":
            assert pad["args"][5:] == (0,) * 5
            assert struct.unpack_from("<Q", _bytes(main["args"])[1])[0] == b.ptr


# ---------------------------------------------------------------------------
# The plain and rung-30 bindings (host.PlainBinding, small_m.SmallMBinding):
# a cached signature keeps its launches and puts each call's pointers and
# scalars into them; what it launches must be exactly what the rung's own
# ``launches`` builds for those pointers (split or not, K empty or not).
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("kernel, dtype, m, n, k", [
    ("30_small_m_bf16", BF16, 1, 4096, 4096),       # split K: counters and partials
    ("30_small_m_bf16", BF16, 8, 64, 16),           # one piece
    ("30_small_m_fp16", np.float16, 4, 32768, 8192),  # counters past 256 bytes
    ("30_small_m_fp32", np.float32, 33, 1000, 64),  # z chunks
    ("30_small_m_fp32", np.float32, 3, 700, 0),     # K = 0: beta * C alone
    ("08_warp_tiled_64x64", np.float32, 64, 512, 8192),   # split K and its reduction
    ("08_warp_tiled", np.float32, 300, 200, 100),         # one piece
])
def test_plain_and_small_m_bindings_launch_what_the_rung_builds(gpu, kernel, dtype, m, n, k):
    from drvgemm.ladders.gemm.registry import RUNGS
    rung = next(r for r in RUNGS if r.name == kernel)
    sets = [(dev((m, k), dtype, ptr=0x1000_0000 + i * 0x100_0000),
             dev((k, n), dtype, ptr=0x4000_0000 + i * 0x100_0000),
             dev((m, n), np.float32, ptr=0x8000_0000 + i * 0x100_0000)) for i in range(3)]
    scalars = [(1.5, 0.5), (2.0, 0.25), (-1.0, 2.0), (1.5, 0.5)]   # beta != 0: one signature
    split = None
    for (a, b, c), (alpha, beta) in zip(sets + sets[:1], scalars):
        drvgemm.gemm(a, b, c, kernel=kernel, alpha=alpha, beta=beta)
        split = split or drvgemm.plan(a, b, c, kernel=kernel, alpha=alpha, beta=beta).split
    info = dispatch.plan_cache_info()
    assert (info["misses"], info["hits"]) == (1, 3)
    per_call = len(gpu) // 4
    assert per_call == (2 if kernel.startswith("08") and split > 1 else 1)
    for i, ((a, b, c), (alpha, beta)) in enumerate(zip(sets + sets[:1], scalars)):
        got = gpu[i * per_call:(i + 1) * per_call]
        ws = got[0]["args"][4] if rung.host == "small_m" else (
            got[0]["args"][2] if per_call == 2 else 0)
        want = rung.launches(got[0]["kernel"], a.ptr, b.ptr, c.ptr, m, n, k, alpha, beta,
                             split=split, workspace=ws)
        assert len(want) == per_call
        for g, (kern, cfg) in zip(got, want):
            assert g["kernel"] == kern
            assert (g["grid"], g["block"], g["smem"]) == (cfg.grid, cfg.block, cfg.smem)
            assert g["args"] == tuple(cfg.args)
