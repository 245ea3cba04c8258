// Mock of compute_kernel_api/eltwise_unary/relu.h.
#pragma once
#include "eltwise_unary.h"
namespace ckernel {
ALWI void relu_tile_init() {}
ALWI void relu_tile(std::uint32_t idst) {
    sim::unary_tile(sim::Unary::Relu, idst);
}
}  // namespace ckernel
