"""Pure-Python models, usable with no GPU and never importing cuda.bindings:
the device catalogue, occupancy, the roofline, fragment layouts and the
shared-memory bank model."""
