// Mock of compute_kernel_api/eltwise_unary/exp.h.
#pragma once
#include "eltwise_unary.h"
namespace ckernel {
template <bool approx = false, bool fast_and_approx = true, std::uint32_t scale = 0x3F800000>
ALWI void exp_tile_init() {}
template <bool approx = false, bool fast_and_approx = true, bool scale_en = false,
          bool skip_positive_check = false, int iterations = 8>
ALWI void exp_tile(std::uint32_t idst, int vector_mode = 4, std::uint16_t scale = 0x3F80) {
    (void)vector_mode, (void)scale;
    sim::unary_tile(sim::Unary::Exp, idst);
}
}  // namespace ckernel
