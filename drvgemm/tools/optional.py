"""Optional packages used for baselines (torch for cuBLAS and softmax,
CuPy for a direct cublasGemmEx): imported once, and any failure, not only a
missing package, means "not available" with the reason kept for reports."""
from __future__ import annotations

_cache: dict = {}


def torch_cuda():
    """The torch module when it imports and sees a GPU, else None."""
    if "torch" not in _cache:
        try:
            import torch
            _cache["torch"] = torch if torch.cuda.is_available() else None
            if _cache["torch"] is None:
                _cache["torch_reason"] = "torch sees no CUDA device"
        except Exception as e:  # a broken install fails with more than ImportError
            _cache["torch"] = None
            _cache["torch_reason"] = f"torch does not import: {type(e).__name__}: {e}"
    return _cache["torch"]


def why_not(name: str) -> str:
    return _cache.get(f"{name}_reason", f"{name} is not installed")
