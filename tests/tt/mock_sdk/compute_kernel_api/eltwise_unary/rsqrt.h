// Mock of compute_kernel_api/eltwise_unary/rsqrt.h.
#pragma once
#include "eltwise_unary.h"
namespace ckernel {
template <bool legacy_compat = true>
ALWI void rsqrt_tile_init() {}
template <bool legacy_compat = true, bool FAST_APPROX = false>
ALWI void rsqrt_tile(std::uint32_t idst) {
    sim::unary_tile(sim::Unary::Rsqrt, idst);
}
}  // namespace ckernel
