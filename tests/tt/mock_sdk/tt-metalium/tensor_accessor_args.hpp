// Mock of tt-metalium/tensor_accessor_args.hpp: a buffer's accessor configuration, appended to
// a kernel's compile-time args (the emulator's accessors need none of it).
#pragma once
#include <cstdint>
#include <vector>

#include "distributed.hpp"

namespace tt::tt_metal {

class TensorAccessorArgs {
public:
    TensorAccessorArgs() = default;
    explicit TensorAccessorArgs(const distributed::MeshBuffer& buffer) : address_(buffer.address()) {}
    void append_to(std::vector<std::uint32_t>& compile_time_args) const {
        compile_time_args.push_back(static_cast<std::uint32_t>(address_ >> 16));
    }

private:
    DeviceAddr address_ = 0;
};

}  // namespace tt::tt_metal
