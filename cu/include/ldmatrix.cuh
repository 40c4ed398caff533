// ldmatrix: the warp loads four 8x8 matrices of 16-bit elements; lanes
// 8j..8j+7 give the row addresses (16-byte aligned) of matrix j, and lane l
// receives in register j the elements (l/4, 2(l%4)) and (l/4, 2(l%4)+1) of
// matrix j -- exactly an mma.sync A or C fragment slice. .trans delivers
// (2(l%4), l/4) and (2(l%4)+1, l/4) instead: the column-major B fragment
// read from a row-major (k-major) tile.
#pragma once
#include "types.cuh"

DEVI void ldmatrix_x4(u32 (&r)[4], u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
DEVI void ldmatrix_x4_trans(u32 (&r)[4], u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
