// Warpgroup MMA (sm_90a) and the warpgroup's register reallocation.
#pragma once
#include "types.cuh"

// wgmma: one warpgroup (4 consecutive warps, the first a multiple of 4)
// issues a 64 x N x K product whose operands the tensor cores read from
// shared memory (or A from registers), accumulating in registers
// asynchronously. fence -> mma... -> commit -> wait.
__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory");
}

// Tells the compiler a register may have changed behind its back (an
// in-flight wgmma writes it), so reads are not hoisted above a wait.
__device__ __forceinline__ void fence_operand(float& r) {
    asm volatile("" : "+f"(r) :: "memory");
}

// Shared-memory matrix descriptor (64 bits), fields in 16-byte units:
//   [0,14)  start address >> 4
//   [16,30) leading-dimension byte offset >> 4
//   [32,46) stride-dimension byte offset >> 4
//   [49,52) base offset (0: every swizzled tile here starts 1024-aligned)
//   [62,64) swizzle: 1 = 128-byte
// For a K-major operand in the 128-byte swizzle, a row of the tile is one
// 128-byte line and 8 rows form a 1024-byte swizzle atom: SBO = 1024 (next 8
// rows), LBO unused (one k16/k8 step never leaves the line). For an MN-major
// operand, 64 16-bit elements along MN fill a line and 8 k-rows an atom:
// LBO = distance to the next 64 MN elements, SBO = 1024 (next 8 k-rows).
__device__ __forceinline__ u64 smem_desc_sw128(u32 saddr, u32 lbo_bytes, u32 sbo_bytes) {
    u64 d = 0;
    d |= static_cast<u64>((saddr >> 4) & 0x3FFF);
    d |= static_cast<u64>((lbo_bytes >> 4) & 0x3FFF) << 16;
    d |= static_cast<u64>((sbo_bytes >> 4) & 0x3FFF) << 32;
    d |= static_cast<u64>(1) << 62;
    return d;
}

#define WGMMA_D128                                                                          \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "              \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "     \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "     \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "     \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "     \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "     \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, "     \
    "%110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, " \
    "%124, %125, %126, %127}"

#define WGMMA_D128_OPERANDS(d)                                                              \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),    \
    "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]),             \
    "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]),          \
    "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),          \
    "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),          \
    "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]),          \
    "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),          \
    "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),          \
    "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]),          \
    "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]),          \
    "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]),          \
    "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]),          \
    "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]),          \
    "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]),          \
    "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]),          \
    "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]),          \
    "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]),       \
    "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]),    \
    "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]),    \
    "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]),    \
    "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]),    \
    "+f"(d[127])

// D(64x256, f32) += A(64x16) * B(16x256), A and B 16-bit from shared memory.
// A is K-major (tnsp-a = 0); B is N-major, i.e. B row-major as K x N, which
// wgmma calls transposed (tnsp-b = 1; allowed for 16-bit types only).
// scale_d == 0 overwrites D instead of accumulating.
__device__ __forceinline__ void wgmma_m64n256k16_bf16(float (&d)[128], u64 desc_a, u64 desc_b,
                                                      int scale_d) {
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %130, 0;\n\t"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " WGMMA_D128
                 ", %128, %129, p, 1, 1, 0, 1;\n\t}"
                 : WGMMA_D128_OPERANDS(d)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

__device__ __forceinline__ void wgmma_m64n256k16_fp16(float (&d)[128], u64 desc_a, u64 desc_b,
                                                      int scale_d) {
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %130, 0;\n\t"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " WGMMA_D128
                 ", %128, %129, p, 1, 1, 0, 1;\n\t}"
                 : WGMMA_D128_OPERANDS(d)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// D(64x256, f32) += A(64x8) * B(8x256) in TF32, A from registers (the
// 64x8 fragment: lane l of warp w holds rows 16w + l/4 (+8), columns l%4
// (+4)), B from shared memory K-major (32-bit types cannot be transposed).
__device__ __forceinline__ void wgmma_m64n256k8_tf32_rs(float (&d)[128], const u32 (&a)[4],
                                                        u64 desc_b, int scale_d) {
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %133, 0;\n\t"
                 "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 " WGMMA_D128
                 ", {%128, %129, %130, %131}, %132, p, 1, 1;\n\t}"
                 : WGMMA_D128_OPERANDS(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
}

// ---------------------------------------------------------------------------
// The same instructions for every N a block tile uses: m64nNk16 (16-bit) and
// m64nNk8 (tf32, A from registers), templated on N. Each thread holds N / 2
// fp32 accumulators, in the layout of the n256 form restricted to the first
// N columns (accumulator i: row 16w + g + 8*((i/2)%2), column 8*(i/4) + 2t + i%2).
// N = 256 forwards to the functions above, so its machine code is theirs.
// The placeholder lists for 32, 64 and 96 accumulators are written out
// because an asm string must be a literal.
// ---------------------------------------------------------------------------
#define WGMMA_D4 \
    "{%0, %1, %2, %3}"

#define WGMMA_D4_OPERANDS(d) \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])

#define WGMMA_D8 \
    "{%0, %1, %2, %3, %4, %5, %6, %7}"

#define WGMMA_D8_OPERANDS(d) \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), \
    "+f"(d[7])

#define WGMMA_D16 \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"

#define WGMMA_D16_OPERANDS(d) \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), \
    "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), \
    "+f"(d[14]), "+f"(d[15])

#define WGMMA_D32 \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, "   \
    "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"

#define WGMMA_D32_OPERANDS(d) \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),   \
    "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]),            \
    "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]),         \
    "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),         \
    "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),         \
    "+f"(d[31])

#define WGMMA_D64 \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, "   \
    "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, "    \
    "%34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, "    \
    "%50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"

#define WGMMA_D64_OPERANDS(d) \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),   \
    "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]),            \
    "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]),         \
    "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),         \
    "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),         \
    "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]),         \
    "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),         \
    "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),         \
    "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]),         \
    "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]),         \
    "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

#define WGMMA_D96 \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, "   \
    "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, "    \
    "%34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, "    \
    "%50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, "    \
    "%66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, "    \
    "%82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}"

#define WGMMA_D96_OPERANDS(d) \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),   \
    "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]),            \
    "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]),         \
    "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),         \
    "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),         \
    "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]),         \
    "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),         \
    "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),         \
    "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]),         \
    "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]),         \
    "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]),         \
    "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]),         \
    "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]),         \
    "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]),         \
    "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]),         \
    "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])

template <int N> struct WgmmaN {
    static_assert(N == 8 || N == 16 || N == 32 || N == 64 || N == 128 || N == 192 || N == 256,
                  "wgmma N: one of 8, 16, 32, 64, 128, 192, 256 (add its placeholder list to "
                  "wgmma.cuh)");
    static constexpr int ACC = N / 2;   // fp32 accumulators per thread
};

template <int N>
__device__ void wgmma_m64nNk16_bf16(float (&d)[N / 2], u64 desc_a, u64 desc_b, int scale_d);
template <int N>
__device__ void wgmma_m64nNk16_fp16(float (&d)[N / 2], u64 desc_a, u64 desc_b, int scale_d);
template <int N>
__device__ void wgmma_m64nNk8_tf32_rs(float (&d)[N / 2], const u32 (&a)[4], u64 desc_b,
                                      int scale_d);
// The swapped 16-bit tile (C^T = B^T A^T for a few rows of A): wgmma's A is
// our B, read MN-major (tnsp-a = 1), its B our A, K-major (tnsp-b = 0).
template <int N>
__device__ void wgmma_m64nNk16_bf16_mn_a(float (&d)[N / 2], u64 desc_a, u64 desc_b, int scale_d);
template <int N>
__device__ void wgmma_m64nNk16_fp16_mn_a(float (&d)[N / 2], u64 desc_a, u64 desc_b, int scale_d);

template <>
__device__ __forceinline__ void wgmma_m64nNk16_bf16<256>(float (&d)[128], u64 desc_a, u64 desc_b,
                                                         int scale_d) {
    wgmma_m64n256k16_bf16(d, desc_a, desc_b, scale_d);
}
template <>
__device__ __forceinline__ void wgmma_m64nNk16_fp16<256>(float (&d)[128], u64 desc_a, u64 desc_b,
                                                         int scale_d) {
    wgmma_m64n256k16_fp16(d, desc_a, desc_b, scale_d);
}
template <>
__device__ __forceinline__ void wgmma_m64nNk8_tf32_rs<256>(float (&d)[128], const u32 (&a)[4],
                                                           u64 desc_b, int scale_d) {
    wgmma_m64n256k8_tf32_rs(d, a, desc_b, scale_d);
}

// N accumulators R = N / 2; IA, IB, IS: the placeholders of desc_a, desc_b, scale_d;
// TA, TB: tnsp-a, tnsp-b (1: that operand is MN-major in shared memory).
#define WGMMA_SS_16BIT(N, R, IA, IB, IS, NAME, TYPE, TA, TB)                                  \
    template <>                                                                               \
    __device__ __forceinline__ void NAME<N>(float (&d)[R], u64 desc_a, u64 desc_b,            \
                                            int scale_d) {                                    \
        asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %" #IS ", 0;\n\t"                  \
                     "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE " "      \
                     WGMMA_D##R ", %" #IA ", %" #IB ", p, 1, 1, " #TA ", " #TB ";\n\t}"       \
                     : WGMMA_D##R##_OPERANDS(d)                                               \
                     : "l"(desc_a), "l"(desc_b), "r"(scale_d));                               \
    }
// A0..A3: the placeholders of the A fragment, IB, IS: desc_b, scale_d.
#define WGMMA_RS_TF32(N, R, A0, A1, A2, A3, IB, IS)                                           \
    template <>                                                                               \
    __device__ __forceinline__ void wgmma_m64nNk8_tf32_rs<N>(float (&d)[R], const u32 (&a)[4], \
                                                             u64 desc_b, int scale_d) {       \
        asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %" #IS ", 0;\n\t"                  \
                     "wgmma.mma_async.sync.aligned.m64n" #N "k8.f32.tf32.tf32 " WGMMA_D##R    \
                     ", {%" #A0 ", %" #A1 ", %" #A2 ", %" #A3 "}, %" #IB ", p, 1, 1;\n\t}"   \
                     : WGMMA_D##R##_OPERANDS(d)                                               \
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d)); \
    }

// Both 16-bit types of one form: wgmma_m64nNk16_{bf16,fp16}SUFFIX<N>.
#define WGMMA_SS_16BIT_TYPES(N, R, IA, IB, IS, SUFFIX, TA, TB)                                \
    WGMMA_SS_16BIT(N, R, IA, IB, IS, wgmma_m64nNk16_bf16##SUFFIX, "bf16", TA, TB)             \
    WGMMA_SS_16BIT(N, R, IA, IB, IS, wgmma_m64nNk16_fp16##SUFFIX, "f16", TA, TB)

WGMMA_SS_16BIT_TYPES(64, 32, 32, 33, 34, , 0, 1)
WGMMA_SS_16BIT_TYPES(128, 64, 64, 65, 66, , 0, 1)
WGMMA_SS_16BIT_TYPES(192, 96, 96, 97, 98, , 0, 1)
WGMMA_SS_16BIT_TYPES(8, 4, 4, 5, 6, _mn_a, 1, 0)
WGMMA_SS_16BIT_TYPES(16, 8, 8, 9, 10, _mn_a, 1, 0)
WGMMA_SS_16BIT_TYPES(32, 16, 16, 17, 18, _mn_a, 1, 0)
WGMMA_RS_TF32(64, 32, 32, 33, 34, 35, 36, 37)
WGMMA_RS_TF32(128, 64, 64, 65, 66, 67, 68, 69)
WGMMA_RS_TF32(192, 96, 96, 97, 98, 99, 100, 101)
#undef WGMMA_SS_16BIT_TYPES
#undef WGMMA_SS_16BIT
#undef WGMMA_RS_TF32

// fp32 -> tf32 with cvt.rna's rounding (to_tf32, mma.cuh), for a register
// only the tensor cores read. They ignore the low 13 bits, so adding half a tf32 unit in the last place (bit 12) to
// the bits of a finite value rounds its magnitude to nearest, ties away, as
// cvt.rna does, without the mask that clears those bits afterwards: two SASS
// instructions instead of three. Infinities and NaNs pass unchanged.
__device__ __forceinline__ u32 to_tf32_operand(float x) {
    u32 r;
    asm("{\n\t.reg .pred fin;\n\t.reg .f32 mag;\n\t"
        "abs.f32 mag, %1;\n\t"
        "setp.lt.f32 fin, mag, 0f7F800000;\n\t"
        "mov.b32 %0, %1;\n\t"
        "@fin add.u32 %0, %0, 4096;\n\t}"
        : "=r"(r) : "f"(x));
    return r;
}

// Register reallocation between warpgroups (sm_90a). Only honoured when the
// kernel has a register cap at entry: __launch_bounds__(threads, 1).
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(N));
}
