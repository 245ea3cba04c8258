// Mock of compute_kernel_api/bcast.h: B's row 0 (ROW), column 0 (COL) or [0,0] (SCALAR) is
// broadcast over A's tile.
#pragma once
#include "common.h"
namespace ckernel {
namespace sim_detail {
template <BroadcastType dim>
constexpr sim::Bcast bcast() {
    return dim == BroadcastType::ROW ? sim::Bcast::Row : dim == BroadcastType::COL ? sim::Bcast::Col
         : dim == BroadcastType::SCALAR ? sim::Bcast::Scalar : sim::Bcast::None;
}
}  // namespace sim_detail
template <EltwiseBinaryType tBcastOp, BroadcastType tBcastDim>
void init_bcast(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t ocb) {
    (void)icb0, (void)icb1, (void)ocb;
}
template <BroadcastType tBcastDim>
ALWI void add_tiles_bcast(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t itile0,
                          std::uint32_t itile1, std::uint32_t idst,
                          std::uint32_t bcast_row_idx = 0) {
    (void)bcast_row_idx;
    sim::binary_tiles(sim::Binary::Add, sim_detail::bcast<tBcastDim>(), icb0, icb1, itile0, itile1, idst);
}
template <BroadcastType tBcastDim>
ALWI void sub_tiles_bcast(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t itile0,
                          std::uint32_t itile1, std::uint32_t idst,
                          std::uint32_t bcast_row_idx = 0) {
    (void)bcast_row_idx;
    sim::binary_tiles(sim::Binary::Sub, sim_detail::bcast<tBcastDim>(), icb0, icb1, itile0, itile1, idst);
}
template <BroadcastType tBcastDim>
ALWI void mul_tiles_bcast(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t itile0,
                          std::uint32_t itile1, std::uint32_t idst,
                          std::uint32_t bcast_row_idx = 0) {
    (void)bcast_row_idx;
    sim::binary_tiles(sim::Binary::Mul, sim_detail::bcast<tBcastDim>(), icb0, icb1, itile0, itile1, idst);
}
}  // namespace ckernel
