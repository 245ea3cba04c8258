// Mock of compute_kernel_api/eltwise_unary/relu.h.
#pragma once
#include "../common.h"
namespace ckernel {
ALWI void relu_tile_init();
ALWI void relu_tile(std::uint32_t idst);
}  // namespace ckernel
