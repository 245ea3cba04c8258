// Mock of compute_kernel_api/eltwise_unary/binop_with_scalar.h: param1 is the scalar's float bits.
#pragma once
#include "eltwise_unary.h"
namespace ckernel {
ALWI void binop_with_scalar_tile_init() {}
ALWI void add_unary_tile(std::uint32_t idst, std::uint32_t param1) { sim::scalar_tile(sim::Binary::Add, idst, param1); }
ALWI void sub_unary_tile(std::uint32_t idst, std::uint32_t param1) { sim::scalar_tile(sim::Binary::Sub, idst, param1); }
ALWI void mul_unary_tile(std::uint32_t idst, std::uint32_t param1) { sim::scalar_tile(sim::Binary::Mul, idst, param1); }
}  // namespace ckernel
