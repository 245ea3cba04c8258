// Mock of hostdevcommon/kernel_structs.h: what host programs and kernels share.
#pragma once
#include <cstdint>

namespace tt {
// Circular buffer ids. An unscoped enum, so kernels write
// `constexpr uint32_t cb = tt::CBIndex::c_0;` and hosts `CBIndex::c_0`.
enum CBIndex : std::uint8_t {
    c_0 = 0, c_1 = 1, c_2 = 2, c_3 = 3, c_4 = 4, c_5 = 5, c_6 = 6, c_7 = 7,
    c_8 = 8, c_9 = 9, c_10 = 10, c_11 = 11, c_12 = 12, c_13 = 13, c_14 = 14, c_15 = 15,
    c_16 = 16, c_17 = 17, c_18 = 18, c_19 = 19, c_20 = 20, c_21 = 21, c_22 = 22, c_23 = 23,
    c_24 = 24, c_25 = 25, c_26 = 26, c_27 = 27, c_28 = 28, c_29 = 29, c_30 = 30, c_31 = 31,
    SIZE = 32
};
}  // namespace tt
