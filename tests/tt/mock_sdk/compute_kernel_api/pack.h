// Mock of compute_kernel_api/pack.h.
#pragma once
#include "common.h"
namespace ckernel {
template <bool out_of_order_output = false>
ALWI void pack_tile(std::uint32_t ifrom_dst, std::uint32_t icb, std::uint32_t output_tile_index = 0) {
    sim::pack_tile(ifrom_dst, icb, output_tile_index);
}
}  // namespace ckernel
