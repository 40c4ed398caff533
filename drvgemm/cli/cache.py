"""``drvgemm cache info|clear``: the compiled-kernel cache on disk."""
from __future__ import annotations

from ..runtime import compiler


def add(sub) -> None:
    c = sub.add_parser("cache", help="where compiled kernels are cached, how much, and clearing it")
    c.add_argument("action", choices=("info", "clear"),
                   help="info: folder, entries and size; clear: remove every entry")
    c.set_defaults(func=run)


def _mb(n: int) -> str:
    return f"{n / 2**20:.1f} MB"


def run(args) -> int:
    info = compiler.cache_info()
    if info["dir"] is None:
        print("the cache is off (DRVGEMM_NO_CACHE is set)")
        return 0
    if args.action == "clear":
        n = compiler.cache_clear()
        print(f"removed {n} entries from {info['dir']}")
        return 0
    print(f"cache folder: {info['dir']}\n"
          f"{info['entries']} entries, {_mb(info['bytes'])} of {_mb(info['limit_bytes'])} "
          "(DRVGEMM_CACHE_MAX_MB; least recently used entries go first)\n"
          f"CUDA headers extracted from NVRTC: {_mb(info['headers_bytes'])}")
    return 0
