// Rung 20's tile scheduler: the problem seen from the wgmma tile, the order
// of the work units (a cluster's worth of tiles and one split of K) and the
// persistent walk over them. Part of 20_tma_wgmma.cu, included after its
// constants (TILE_Y, TILE_X, CLUSTER, GROUP) and Elem<>.
#pragma once

// The problem seen from the wgmma tile: the Y direction is wgmma's M
// (TILE_Y per block), X is wgmma's N (TILE_X).
struct Problem {
    int M, N, K;
    int y_ext, x_ext;        // extents along Y and X
    int tiles_x, units_y;    // tile units: a cluster's worth of tiles along Y
    int tile_units;          // units_y * tiles_x
    int splits;              // pieces of K per tile (split-K): 1 = the whole of K
    int units;               // tile_units * splits: the work units the grid walks
    int k_tiles;             // k-tiles of the whole of K
};

template <int ELEM>
__device__ __forceinline__ Problem make_problem(int M, int N, int K, int splits) {
    Problem p;
    p.M = M;
    p.N = N;
    p.K = K;
    p.y_ext = Elem<ELEM>::SWAP ? N : M;
    p.x_ext = Elem<ELEM>::SWAP ? M : N;
    const int tiles_y = (p.y_ext + TILE_Y - 1) / TILE_Y;
    p.tiles_x = (p.x_ext + TILE_X - 1) / TILE_X;
    p.units_y = (tiles_y + CLUSTER - 1) / CLUSTER;
    p.tile_units = p.units_y * p.tiles_x;
    p.splits = SPLIT_K ? splits : 1;   // SPLIT_K=0: K in one piece, whatever was passed
    p.units = SPLIT_K ? p.tile_units * splits : p.tile_units;
    p.k_tiles = (K + Elem<ELEM>::K_TILE - 1) / Elem<ELEM>::K_TILE;
    return p;
}

// Tile unit -> tile origin. Units are numbered along a band of GROUP unit
// rows, crossing the band before moving along it, so consecutive units - the ones in flight together - form
// a compact block of C whose A rows and B columns stay in L2.
__device__ __forceinline__ void unit_origin(const Problem& p, int u, u32 rank, int& y0, int& x0) {
    const int per_group = GROUP * p.tiles_x;
    const int g = u / per_group;
    const int first = g * GROUP;
    const int rows = min(p.units_y - first, GROUP);
    const int local = u - g * per_group;
    const int uy = first + local % rows;
    const int tx = local / rows;
    y0 = (uy * CLUSTER + static_cast<int>(rank)) * TILE_Y;
    x0 = tx * TILE_X;
}

// One work unit: a tile unit and the k-tiles [kt0, kt1) of one split. Units
// run split by split (every tile's split 0, then every tile's split 1, ...),
// so the units in flight together read the same k-range of A and B. Split s
// takes k-tiles [s * KT / S, (s + 1) * KT / S): the pieces cover K exactly
// once and differ by at most one k-tile; with KT < S some are empty, and an
// empty piece still writes its (zero) partial, which the reduction adds.
struct Work {
    int y0, x0;     // tile origin
    int split;      // which piece of K
    int kt0, kt1;   // its k-tiles
};

__device__ __forceinline__ Work unit_work(const Problem& p, int u, u32 rank) {
    Work w;
    if constexpr (!SPLIT_K) {   // the unsplit build: a tile and the whole of K
        w.split = 0;
        unit_origin(p, u, rank, w.y0, w.x0);
        w.kt0 = 0;
        w.kt1 = p.k_tiles;
        return w;
    }
    w.split = u / p.tile_units;
    unit_origin(p, u - w.split * p.tile_units, rank, w.y0, w.x0);
    // 64-bit: split * k_tiles can pass 2^31 for a very long K
    w.kt0 = static_cast<int>(static_cast<long long>(w.split) * p.k_tiles / p.splits);
    w.kt1 = static_cast<int>(static_cast<long long>(w.split + 1) * p.k_tiles / p.splits);
    return w;
}

// The persistent walk: block b (cluster b / CLUSTER) takes units b, b + G,
// b + 2G, ... where G is the grid in clusters. Producer and consumers walk the
// same sequence, so no unit number ever has to pass between them. (The
// stride stays unsigned, as gridDim is: the loops add it as written.)
__device__ __forceinline__ int first_unit() { return blockIdx.x / CLUSTER; }
__device__ __forceinline__ u32 unit_stride() { return gridDim.x / CLUSTER; }
