// Mock of compute_kernel_api/eltwise_unary/sqrt.h.
#pragma once
#include "../common.h"
namespace ckernel {
ALWI void sqrt_tile_init();
ALWI void sqrt_tile(std::uint32_t idst);
}  // namespace ckernel
