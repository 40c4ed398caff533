// One thin wrapper per instruction the tensor-core rungs (cu/09 .. cu/14)
// use: asynchronous copies, ldmatrix, mma.sync / wmma, named barriers, and
// the plain shared/global accesses. Kernels touch memory and the tensor
// cores only through these, so each instruction's contract is stated once,
// next to its PTX.
//
// No CUDA header is included. NVRTC finds <mma.h>, <cuda_fp16.h> and
// <cuda_bf16.h> only in a CUDA toolkit's include directory (13.3 and later
// can unpack a bundled copy, 13.0 on the H200 cannot), and the kernels need
// none of them: the 16-bit inputs are only ever raw bits that go straight
// from memory to ldmatrix / wmma.load, so bf16 and fp16 matrices are passed
// as `const unsigned short*` (the same 8-byte pointer in the PTX signature
// as `const __nv_bfloat16*`).
#pragma once

#define DEVI __device__ __forceinline__

typedef unsigned short u16;

// ---------------------------------------------------------------------------
// Shared memory addressing. ldmatrix, cp.async and ld/st.shared take a 32-bit
// address in the shared window; computing it once per tile and adding byte
// offsets keeps address arithmetic off the 64-bit path.
// ---------------------------------------------------------------------------
DEVI unsigned smem_u32(const void* p) {
    unsigned a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}

// The block's dynamic shared memory (its size comes from the launch).
DEVI unsigned char* dynamic_smem() {
    extern __shared__ __align__(128) unsigned char drvgemm_dynamic_smem[];
    return drvgemm_dynamic_smem;
}

DEVI unsigned lds32(unsigned addr) {
    unsigned v;
    asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(addr));
    return v;
}
DEVI uint4 lds128(unsigned addr) {
    uint4 v;
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
    return v;
}
DEVI void sts16(unsigned addr, u16 v) {
    asm volatile("st.shared.b16 [%0], %1;" :: "r"(addr), "h"(v) : "memory");
}
DEVI void sts32(unsigned addr, unsigned v) {
    asm volatile("st.shared.b32 [%0], %1;" :: "r"(addr), "r"(v) : "memory");
}

// ---------------------------------------------------------------------------
// Global memory. Plain loads and stores; the wrappers exist so that every
// access a kernel makes is visible in one list.
// ---------------------------------------------------------------------------
DEVI u16 ldg16(const u16* p) { return *p; }
DEVI float ldg_f32(const float* p) { return *p; }
DEVI float2 ldg_f32x2(const float* p) { return *reinterpret_cast<const float2*>(p); }
DEVI float4 ldg_f32x4(const float* p) { return *reinterpret_cast<const float4*>(p); }
DEVI void stg_f32(float* p, float v) { *p = v; }
DEVI void stg_f32x2(float* p, float2 v) { *reinterpret_cast<float2*>(p) = v; }
DEVI void stg_f32x4(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }

// ---------------------------------------------------------------------------
// cp.async (sm_80+): global -> shared without passing through registers, so
// a warp issues a tile's copies and goes on computing while they fly.
// src_bytes < size zero-fills the rest of the destination; src_bytes == 0
// reads nothing, which is how tiles hanging over the matrix edge become
// zeros (the source pointer must still be a valid, aligned address).
// Copies are grouped with commit_group; wait_group<N> returns once at most
// N of this thread's most recent groups are still in flight. Their data is
// visible to other threads only after a barrier that follows the wait.
// ---------------------------------------------------------------------------
DEVI void cp_async_16(unsigned dst, const void* src, unsigned src_bytes) {
    // .cg: cache in L2 only; a tile is read once per block, so L1 would
    // only evict more useful lines.
    asm volatile("{ .reg .u64 g; cvta.to.global.u64 g, %1;"
                 " cp.async.cg.shared.global [%0], [g], 16, %2; }"
                 :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
DEVI void cp_async_4(unsigned dst, const void* src, unsigned src_bytes) {
    asm volatile("{ .reg .u64 g; cvta.to.global.u64 g, %1;"
                 " cp.async.ca.shared.global [%0], [g], 4, %2; }"
                 :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
DEVI void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
DEVI void cp_async_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }

// ---------------------------------------------------------------------------
// ldmatrix: the warp loads four 8x8 matrices of 16-bit elements; lanes
// 8j..8j+7 give the row addresses (16-byte aligned) of matrix j, and lane l
// receives in register j the elements (l/4, 2(l%4)) and (l/4, 2(l%4)+1) of
// matrix j -- exactly an mma.sync A or C fragment slice. .trans delivers
// (2(l%4), l/4) and (2(l%4)+1, l/4) instead: the column-major B fragment
// read from a row-major (k-major) tile.
// ---------------------------------------------------------------------------
DEVI void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
DEVI void ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

// ---------------------------------------------------------------------------
// mma.sync: D = A * B + D on one warp, fp32 accumulators in place.
// ---------------------------------------------------------------------------
// fp32 -> tf32 with round-to-nearest, ties away from zero: the low 13
// mantissa bits become zero, the tensor core reads the other 19.
DEVI unsigned to_tf32(float x) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}
DEVI void mma_tf32_16x8x8(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
DEVI void mma_bf16_16x8x16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
DEVI void mma_f16_16x8x16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// ---------------------------------------------------------------------------
// WMMA, m16n16k16, fp16 inputs, fp32 accumulators. The fragment layout is
// opaque (8 registers each); nvcuda::wmma in <mma.h> is a C++ face on these
// same instructions. Row starts must be 32-byte aligned (the fragment size),
// so ldm * element size must be a multiple of 32 bytes.
// ---------------------------------------------------------------------------
DEVI void wmma_load_a_f16(unsigned (&a)[8], unsigned addr, unsigned ldm) {
    asm volatile("wmma.load.a.sync.aligned.row.m16n16k16.shared.f16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7}, [%8], %9;"
                 : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]),
                   "=r"(a[4]), "=r"(a[5]), "=r"(a[6]), "=r"(a[7])
                 : "r"(addr), "r"(ldm));
}
DEVI void wmma_load_b_f16(unsigned (&b)[8], unsigned addr, unsigned ldm) {
    asm volatile("wmma.load.b.sync.aligned.row.m16n16k16.shared.f16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7}, [%8], %9;"
                 : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3]),
                   "=r"(b[4]), "=r"(b[5]), "=r"(b[6]), "=r"(b[7])
                 : "r"(addr), "r"(ldm));
}
DEVI void wmma_mma_f16_f32(float (&d)[8], const unsigned (&a)[8], const unsigned (&b)[8]) {
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
DEVI void wmma_store_f32(unsigned addr, const float (&d)[8], unsigned ldm) {
    asm volatile("wmma.store.d.sync.aligned.row.m16n16k16.shared.f32 "
                 "[%0], {%1, %2, %3, %4, %5, %6, %7, %8}, %9;"
                 :: "r"(addr), "f"(d[0]), "f"(d[1]), "f"(d[2]), "f"(d[3]),
                    "f"(d[4]), "f"(d[5]), "f"(d[6]), "f"(d[7]), "r"(ldm) : "memory");
}

// ---------------------------------------------------------------------------
// Named barriers. Barrier 0 is __syncthreads(); ids 1..15 are free. `count`
// (a multiple of 32) is the number of threads that must arrive before the
// barrier completes: barrier.sync arrives and waits, barrier.arrive only
// arrives. When the barrier completes, the memory accesses each arriving
// thread made before it are performed for every participant -- which is
// what lets one group of warps hand a shared-memory buffer to another.
// The non-.aligned forms are used because producer and consumer warps reach
// these barriers from different code.
// ---------------------------------------------------------------------------
DEVI void named_barrier_sync(unsigned id, unsigned count) {
    asm volatile("barrier.sync %0, %1;" :: "r"(id), "r"(count) : "memory");
}
DEVI void named_barrier_arrive(unsigned id, unsigned count) {
    asm volatile("barrier.arrive %0, %1;" :: "r"(id), "r"(count) : "memory");
}
