// Mock of compute_kernel_api/reg_api.h: the DST register protocol (acquire zeroes DST).
#pragma once
#include "common.h"
namespace ckernel {
ALWI void tile_regs_acquire() { sim::dst_zero(); }
ALWI void tile_regs_wait() {}
ALWI void tile_regs_commit() {}
ALWI void tile_regs_release() {}
}  // namespace ckernel
