// Shared by the mock kernel headers: circular buffer ids and runtime arguments.
#pragma once
#include <cstdint>

#include "hostdevcommon/kernel_structs.h"
#include "sim_api.h"

#define ALWI inline
#define FORCE_INLINE inline

template <typename T>
T get_arg_val(int arg_idx) {
    return static_cast<T>(sim::arg(arg_idx));
}

constexpr std::uint32_t get_compile_time_arg_val(std::uint32_t index) { return index; }
