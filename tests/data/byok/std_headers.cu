// A kernel written for nvcc (with --expt-relaxed-constexpr) that reaches for
// the C++ standard headers in device code. Each static_assert holds a value
// of the header it names, so the file compiles only where they are right.
#include <algorithm>
#include <array>
#include <bit>
#include <cfloat>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <new>
#include <numeric>
#include <tuple>
#include <type_traits>
#include <utility>

static_assert(std::numeric_limits<float>::max() == FLT_MAX, "limits");
static_assert(std::numeric_limits<int>::lowest() == -2147483647 - 1, "limits");
static_assert(std::is_same_v<std::conditional_t<true, int32_t, float>, int>, "type_traits");
static_assert(std::bit_cast<uint32_t>(1.0f) == 0x3f800000u, "bit");
static_assert(std::popcount(0xF0u) == 4, "bit");
static_assert(std::get<1>(std::tuple<int, float>{1, 2.5f}) == 2.5f, "tuple");
static_assert(std::array<int, 3>{1, 2, 3}[2] == 3, "array");
static_assert(std::plus<int>{}(2, 3) == 5, "functional");
static_assert(std::gcd(12, 18) == 6, "numeric");
static_assert(std::pair<int, int>{4, 5}.second == 5, "utility");
static_assert(std::initializer_list<int>{1, 2, 3}.size() == 3, "initializer_list");
static_assert(std::max({3, 9, 4}) == 9, "algorithm over a braced list");

template <typename T, typename Op = std::plus<T>>
__device__ T fold(std::initializer_list<T> xs, Op op = {}) {
    return std::accumulate(xs.begin(), xs.end(), T(0), op);
}

struct Acc {
    float v;
    __device__ explicit Acc(float x) : v(x) {}
};

// out[t] = 7 for every thread: 1 + 2 + 3 placed in shared memory by placement
// new, swapped there and back with infinity, plus one for infinity > 0.
template <typename T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
__global__ void std_kernel(T* out) {
    __shared__ alignas(Acc) unsigned char slot[sizeof(Acc)];
    Acc* a = new (slot) Acc(fold<T>({T(1), T(2), T(3)}));
    std::array<T, 2> two{a->v, std::numeric_limits<T>::infinity()};
    auto [lo, hi] = std::make_pair(two[0], *std::next(two.begin()));
    T x = lo, y = hi;
    std::swap(x, y);
    using std::swap;
    swap(x, y);
    out[threadIdx.x] = x + T(std::get<0>(std::make_tuple(std::move(y), 1)) > 0);
}
template __global__ void std_kernel<float>(float*);
