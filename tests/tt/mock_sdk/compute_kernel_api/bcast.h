// Mock of compute_kernel_api/bcast.h: B's row 0 (ROW), column 0 (COL) or [0,0] (SCALAR) is
// broadcast over A's tile.
#pragma once
#include "common.h"
namespace ckernel {
template <EltwiseBinaryType tBcastOp, BroadcastType tBcastDim>
void init_bcast(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t ocb);
template <BroadcastType tBcastDim>
ALWI void add_tiles_bcast(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t itile0,
                          std::uint32_t itile1, std::uint32_t idst,
                          std::uint32_t bcast_row_idx = 0);
template <BroadcastType tBcastDim>
ALWI void sub_tiles_bcast(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t itile0,
                          std::uint32_t itile1, std::uint32_t idst,
                          std::uint32_t bcast_row_idx = 0);
template <BroadcastType tBcastDim>
ALWI void mul_tiles_bcast(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t itile0,
                          std::uint32_t itile1, std::uint32_t idst,
                          std::uint32_t bcast_row_idx = 0);
}  // namespace ckernel
