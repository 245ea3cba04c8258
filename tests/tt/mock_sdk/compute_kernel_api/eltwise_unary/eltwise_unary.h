// Mock of compute_kernel_api/eltwise_unary/eltwise_unary.h.
#pragma once
#include "../common.h"
namespace ckernel {
ALWI void init_sfpu(std::uint32_t icb, std::uint32_t ocb) { (void)icb, (void)ocb; }
}  // namespace ckernel
