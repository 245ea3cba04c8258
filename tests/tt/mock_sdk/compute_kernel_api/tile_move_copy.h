// Mock of compute_kernel_api/tile_move_copy.h.
#pragma once
#include "common.h"
namespace ckernel {
ALWI void copy_tile_init(std::uint32_t cbid) { (void)cbid; }
ALWI void copy_tile(std::uint32_t in_cb_id, std::uint32_t in_tile_index, std::uint32_t dst_tile_index) {
    sim::copy_tile(in_cb_id, in_tile_index, dst_tile_index);
}
}  // namespace ckernel
