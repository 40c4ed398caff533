// assert() is built into NVRTC for device code (it traps, printing the
// failed condition); nothing else is needed.
