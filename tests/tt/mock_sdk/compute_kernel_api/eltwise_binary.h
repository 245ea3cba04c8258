// Mock of compute_kernel_api/eltwise_binary.h.
#pragma once
#include "common.h"
namespace ckernel {
ALWI void binary_op_init_common(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t ocb) {
    (void)icb0, (void)icb1, (void)ocb;
}
ALWI void add_tiles_init(std::uint32_t icb0, std::uint32_t icb1, bool acc_to_dest = false) {
    (void)icb0, (void)icb1, (void)acc_to_dest;
}
ALWI void sub_tiles_init(std::uint32_t icb0, std::uint32_t icb1, bool acc_to_dest = false) {
    (void)icb0, (void)icb1, (void)acc_to_dest;
}
ALWI void mul_tiles_init(std::uint32_t icb0, std::uint32_t icb1) { (void)icb0, (void)icb1; }
ALWI void add_tiles(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t itile0,
                    std::uint32_t itile1, std::uint32_t idst) {
    sim::binary_tiles(sim::Binary::Add, sim::Bcast::None, icb0, icb1, itile0, itile1, idst);
}
ALWI void sub_tiles(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t itile0,
                    std::uint32_t itile1, std::uint32_t idst) {
    sim::binary_tiles(sim::Binary::Sub, sim::Bcast::None, icb0, icb1, itile0, itile1, idst);
}
ALWI void mul_tiles(std::uint32_t icb0, std::uint32_t icb1, std::uint32_t itile0,
                    std::uint32_t itile1, std::uint32_t idst) {
    sim::binary_tiles(sim::Binary::Mul, sim::Bcast::None, icb0, icb1, itile0, itile1, idst);
}
}  // namespace ckernel
