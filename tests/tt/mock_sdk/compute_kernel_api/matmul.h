// Mock of compute_kernel_api/matmul.h (the API with transpose in mm_init and a five-argument
// matmul_tiles; DST accumulates across calls).
#pragma once
#include "common.h"
namespace ckernel {
ALWI void mm_init(std::uint32_t in0_cb_id, std::uint32_t in1_cb_id, std::uint32_t out_cb_id,
                  const std::uint32_t transpose = 0) {
    (void)in0_cb_id, (void)in1_cb_id, (void)out_cb_id;
    sim::set_transpose_b(transpose != 0);
}
ALWI void mm_init_short(std::uint32_t in0_cb_id, std::uint32_t in1_cb_id,
                        const std::uint32_t transpose = 0) {
    mm_init(in0_cb_id, in1_cb_id, 0, transpose);
}
ALWI void matmul_tiles(std::uint32_t in0_cb_id, std::uint32_t in1_cb_id,
                       std::uint32_t in0_tile_index, std::uint32_t in1_tile_index,
                       std::uint32_t idst) {
    sim::matmul_tiles(in0_cb_id, in1_cb_id, in0_tile_index, in1_tile_index, idst);
}
}  // namespace ckernel
