// glibc's <sys/types.h> (pulled in by <stdlib.h>, <cmath> and <algorithm>
// under nvcc) defines these short names; code written for nvcc uses them.
#ifndef DRVGEMM_SHIM_SYS_TYPES_H
#define DRVGEMM_SHIM_SYS_TYPES_H
#ifndef uint
typedef unsigned int uint;
#endif
#ifndef ushort
typedef unsigned short ushort;
#endif
#ifndef ulong
typedef unsigned long ulong;
#endif
#endif
