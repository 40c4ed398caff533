"""The one device catalogue (drvgemm/analysis/devices.py) as the ``--gpu``
option of ``occupancy`` and ``roofline`` sees it: the same names, the same
default (this GPU when the catalogue knows it, else H200), and one message
for a device that lacks the figures a command needs."""
from __future__ import annotations

from ..analysis.devices import CATALOGUE, Device, find

DEFAULT = "H200"
_KIND = {"resources": "occupancy", "ceilings": "roofline"}
_NOTES = {"seed": "the worked example of the seed notes, the design notes this project "
                  "grew from: 48 warps and 100 KB of shared memory per SM"}


def catalogue_help() -> str:
    """One line for --help: every device, with what it lacks."""
    parts = []
    for d in CATALOGUE:
        only = [cmd for attr, cmd in _KIND.items() if getattr(d, attr) is not None]
        text = d.name if len(only) == len(_KIND) else f"{d.name} ({only[0]} only)"
        if d.name in _NOTES:
            text += f" [{d.name}: {_NOTES[d.name]}]"
        parts.append(text)
    return ", ".join(parts)


def lookup(name: str, need: str) -> Device:
    """The catalogue entry for a --gpu name; ValueError naming the catalogue
    when the name is unknown or the entry lacks ``need`` ("resources" for
    occupancy, "ceilings" for roofline)."""
    d = find(name)
    if d is None:
        raise ValueError(f"--gpu {name!r}: not in the device catalogue; known: {catalogue_help()}")
    if getattr(d, need) is None:
        raise ValueError(f"--gpu {name!r}: {d.name} has no {_KIND[need]} figures in the device "
                         f"catalogue; devices with them: "
                         + ", ".join(x.name for x in CATALOGUE if getattr(x, need) is not None))
    return d
