// printf is built into NVRTC for device code. FILE, fopen, fprintf, stderr
// are host-only: guard the code using them with #ifndef __CUDACC_RTC__.
