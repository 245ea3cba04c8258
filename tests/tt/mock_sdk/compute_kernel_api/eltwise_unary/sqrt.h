// Mock of compute_kernel_api/eltwise_unary/sqrt.h.
#pragma once
#include "eltwise_unary.h"
namespace ckernel {
ALWI void sqrt_tile_init() {}
ALWI void sqrt_tile(std::uint32_t idst) {
    sim::unary_tile(sim::Unary::Sqrt, idst);
}
}  // namespace ckernel
