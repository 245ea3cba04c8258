// Mock of compute_kernel_api/eltwise_unary/gelu.h.
#pragma once
#include "eltwise_unary.h"
namespace ckernel {
template <bool fast_and_approx = true>
ALWI void gelu_tile_init() {}
template <bool fast_and_approx = true>
ALWI void gelu_tile(std::uint32_t idst) {
    sim::unary_tile(sim::Unary::Gelu, idst);
}
}  // namespace ckernel
