"""Kernel symbols as their source names them. A C++ kernel's entry in the
cubin is its Itanium-mangled symbol ('_Z3redI13__nv_bfloat16Li256EEvPKT_Pfi');
the C++ runtime's ``__cxa_demangle`` reads it back ('void red<__nv_bfloat16,
256>(__nv_bfloat16 const*, float*, int)'), and ``call_name`` trims that to the
name a compile or ``Module.kernel`` call takes ('red<__nv_bfloat16, 256>').
Where the C++ runtime library cannot be loaded, or a symbol is not a mangled
one (an extern "C" kernel, a PTX entry), the symbol stands as it is."""
from __future__ import annotations

import ctypes
import functools

__all__ = ["demangle", "call_name", "same_name"]


@functools.lru_cache(maxsize=1)
def _demangler():
    """(__cxa_demangle, free) from the C++ and C runtimes, or None."""
    try:
        cxx = ctypes.CDLL("libstdc++.so.6")
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    fn = getattr(cxx, "__cxa_demangle", None)
    free = getattr(libc, "free", None)
    if fn is None or free is None:
        return None
    fn.restype = ctypes.c_void_p
    fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t),
                   ctypes.POINTER(ctypes.c_int)]
    free.argtypes = [ctypes.c_void_p]
    return fn, free


@functools.lru_cache(maxsize=4096)
def demangle(symbol: str) -> str | None:
    """The C++ declaration a mangled symbol stands for, or None (not mangled,
    or no demangler on this machine)."""
    if not symbol.startswith("_Z"):
        return None
    d = _demangler()
    if d is None:
        return None
    fn, free = d
    status = ctypes.c_int(0)
    p = fn(symbol.encode(), None, None, ctypes.byref(status))
    if not p:
        return None
    try:
        return ctypes.string_at(p).decode(errors="replace") if status.value == 0 else None
    finally:
        free(p)


def call_name(symbol: str) -> str:
    """The name a kernel's source gives it, as a compile call takes it:
    namespaces and template arguments kept, the return type and the
    parameter list dropped ('ns::kern', 'red<__nv_bfloat16, 256>'). The
    symbol itself where it does not demangle to such a name (extern "C",
    PTX entries, kernels in an anonymous namespace)."""
    text = demangle(symbol)
    if text is None or "(anonymous namespace)" in text:
        return symbol
    if text.startswith("void "):          # a template's symbol carries its return type
        text = text[5:]
    depth = 0
    for i, ch in enumerate(text):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            return text[:i] or symbol
    return text


def same_name(a: str, b: str) -> bool:
    """Two spellings of one C++ name ('tk<128,float>', 'tk<128, float>')."""
    return "".join(a.split()) == "".join(b.split())
