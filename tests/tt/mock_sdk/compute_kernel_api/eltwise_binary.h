// Mock of compute_kernel_api/eltwise_binary.h.
#pragma once
#include "common.h"
namespace ckernel {
ALWI void binary_op_init_common(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t ocb);
ALWI void add_tiles_init(std::uint32_t icb0, std::uint32_t icb1, bool acc_to_dest = false);
ALWI void sub_tiles_init(std::uint32_t icb0, std::uint32_t icb1, bool acc_to_dest = false);
ALWI void mul_tiles_init(std::uint32_t icb0, std::uint32_t icb1);
ALWI void add_tiles(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t itile0,
                    std::uint32_t itile1, std::uint32_t idst);
ALWI void sub_tiles(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t itile0,
                    std::uint32_t itile1, std::uint32_t idst);
ALWI void mul_tiles(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t itile0,
                    std::uint32_t itile1, std::uint32_t idst);
}  // namespace ckernel
