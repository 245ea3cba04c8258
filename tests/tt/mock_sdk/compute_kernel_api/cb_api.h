// Mock of compute_kernel_api/cb_api.h.
#pragma once
#include "common.h"
namespace ckernel {
ALWI void cb_wait_front(std::uint32_t cbid, std::uint32_t ntiles) { sim::cb_wait(cbid, ntiles); }
ALWI void cb_pop_front(std::uint32_t cbid, std::uint32_t ntiles) { sim::cb_pop(cbid, ntiles); }
ALWI void cb_reserve_back(std::uint32_t cbid, std::uint32_t ntiles) { sim::cb_reserve(cbid, ntiles); }
ALWI void cb_push_back(std::uint32_t cbid, std::uint32_t ntiles) { sim::cb_push(cbid, ntiles); }
}  // namespace ckernel
