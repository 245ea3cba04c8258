// Mock of tt-metalium/tensor_accessor_args.hpp: a buffer's accessor configuration, appended to
// a kernel's compile-time args.
#pragma once
#include <cstdint>
#include <vector>

#include "distributed.hpp"

namespace tt::tt_metal {

class TensorAccessorArgs {
public:
    TensorAccessorArgs() = default;
    explicit TensorAccessorArgs(const Buffer& buffer);
    explicit TensorAccessorArgs(const distributed::MeshBuffer& buffer);
    void append_to(std::vector<std::uint32_t>& compile_time_args) const;
};

}  // namespace tt::tt_metal
