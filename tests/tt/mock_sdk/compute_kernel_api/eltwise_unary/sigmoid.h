// Mock of compute_kernel_api/eltwise_unary/sigmoid.h.
#pragma once
#include "eltwise_unary.h"
namespace ckernel {
template <bool fast_and_approx = false>
ALWI void sigmoid_tile_init() {}
template <int vec_mode = 4, bool fast_and_approx = false>
ALWI void sigmoid_tile(std::uint32_t idst) {
    sim::unary_tile(sim::Unary::Sigmoid, idst);
}
}  // namespace ckernel
