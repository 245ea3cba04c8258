// Mock of compute_kernel_api/eltwise_unary/gelu.h.
#pragma once
#include "../common.h"
namespace ckernel {
template <bool fast_and_approx = true>
ALWI void gelu_tile_init();
template <bool fast_and_approx = true>
ALWI void gelu_tile(std::uint32_t idst);
}  // namespace ckernel
