// memcpy and memset are built into NVRTC for device code; the rest of
// <cstring> (strlen, strcmp, ...) is host-only.
