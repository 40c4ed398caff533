// WMMA, m16n16k16, fp16 inputs, fp32 accumulators. The fragment layout is
// opaque (8 registers each); nvcuda::wmma in <mma.h> is a C++ face on these
// same instructions. Row starts must be 32-byte aligned (the fragment size),
// so ldm * element size must be a multiple of 32 bytes.
#pragma once
#include "types.cuh"

DEVI void wmma_load_a_f16(u32 (&a)[8], u32 addr, u32 ldm) {
    asm volatile("wmma.load.a.sync.aligned.row.m16n16k16.shared.f16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7}, [%8], %9;"
                 : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]),
                   "=r"(a[4]), "=r"(a[5]), "=r"(a[6]), "=r"(a[7])
                 : "r"(addr), "r"(ldm));
}
DEVI void wmma_load_b_f16(u32 (&b)[8], u32 addr, u32 ldm) {
    asm volatile("wmma.load.b.sync.aligned.row.m16n16k16.shared.f16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7}, [%8], %9;"
                 : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3]),
                   "=r"(b[4]), "=r"(b[5]), "=r"(b[6]), "=r"(b[7])
                 : "r"(addr), "r"(ldm));
}
DEVI void wmma_mma_f16_f32(float (&d)[8], const u32 (&a)[8], const u32 (&b)[8]) {
    asm("wmma.mma.sync.aligned.row.row.m16n16k16.f32.f32 "
        "{%0, %1, %2, %3, %4, %5, %6, %7}, "
        "{%8, %9, %10, %11, %12, %13, %14, %15}, "
        "{%16, %17, %18, %19, %20, %21, %22, %23}, "
        "{%0, %1, %2, %3, %4, %5, %6, %7};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]),
          "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(a[4]), "r"(a[5]), "r"(a[6]), "r"(a[7]),
          "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]), "r"(b[4]), "r"(b[5]), "r"(b[6]), "r"(b[7]));
}
DEVI void wmma_store_f32(u32 addr, const float (&d)[8], u32 ldm) {
    asm volatile("wmma.store.d.sync.aligned.row.m16n16k16.shared.f32 "
                 "[%0], {%1, %2, %3, %4, %5, %6, %7, %8}, %9;"
                 :: "r"(addr), "f"(d[0]), "f"(d[1]), "f"(d[2]), "f"(d[3]),
                    "f"(d[4]), "f"(d[5]), "f"(d[6]), "f"(d[7]), "r"(ldm) : "memory");
}
