// Mock of tt-metalium/host_api.hpp (with the types it brings in: core coordinates, circular
// buffer and kernel configs, programs). Programs record what the host asks for; the mesh
// workload runs them on the emulator (sim_runtime.hpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "../hostdevcommon/kernel_structs.h"
#include "../sim_runtime.hpp"

namespace tt {
enum class DataFormat : std::uint8_t {
    Float32 = 0, Float16 = 1, Bfp8 = 2, Bfp4 = 3, Tf32 = 4, Float16_b = 5, Bfp8_b = 6,
    Bfp4_b = 7, Int32 = 8, UInt16 = 9, Lf8 = 10, Bfp2 = 11, UInt8 = 12, UInt32 = 13,
    Int8 = 14, Bfp2_b = 15, Invalid = 0xff
};
}  // namespace tt

struct CoreCoord {
    std::size_t x = 0;
    std::size_t y = 0;
    CoreCoord() = default;
    CoreCoord(std::size_t x, std::size_t y) : x(x), y(y) {}
    bool operator<(const CoreCoord& o) const { return std::make_pair(x, y) < std::make_pair(o.x, o.y); }
};

struct CoreRange {
    CoreCoord start_coord;
    CoreCoord end_coord;  // inclusive
    CoreRange(const CoreCoord& point) : start_coord(point), end_coord(point) {}
    CoreRange(const CoreCoord& start, const CoreCoord& end) : start_coord(start), end_coord(end) {}
    bool operator<(const CoreRange& o) const {
        return std::make_pair(start_coord, end_coord) < std::make_pair(o.start_coord, o.end_coord);
    }
};

class CoreRangeSet {
public:
    CoreRangeSet() = default;
    CoreRangeSet(const std::vector<CoreRange>& core_ranges) : ranges_(core_ranges) {}
    CoreRangeSet(const std::set<CoreRange>& core_ranges) : ranges_(core_ranges.begin(), core_ranges.end()) {}
    CoreRangeSet(const CoreRange& core_range) : ranges_{core_range} {}
    const std::vector<CoreRange>& ranges() const { return ranges_; }

private:
    std::vector<CoreRange> ranges_;
};

namespace tt::tt_metal {

using DeviceAddr = std::uint64_t;
using KernelHandle = std::uint32_t;
using CBHandle = std::uintptr_t;
using CoreSpec = std::variant<CoreCoord, CoreRange, CoreRangeSet>;

enum class BufferType { DRAM, L1, SYSTEM_MEMORY, L1_SMALL, TRACE };
enum class MathFidelity : std::uint8_t { LoFi = 0, HiFi2 = 2, HiFi3 = 3, HiFi4 = 4, Invalid = 0xff };
enum class DataMovementProcessor { RISCV_0 = 0, RISCV_1 = 1 };
enum NOC : std::uint8_t { RISCV_0_default = 0, RISCV_1_default = 1, NOC_0 = 0, NOC_1 = 1 };
enum class NOC_MODE : std::uint8_t { DM_DEDICATED_NOC = 0, DM_DYNAMIC_NOC = 1 };

struct DataMovementConfig {
    DataMovementProcessor processor = DataMovementProcessor::RISCV_0;
    NOC noc = NOC::RISCV_0_default;
    NOC_MODE noc_mode = NOC_MODE::DM_DEDICATED_NOC;
    std::vector<std::uint32_t> compile_args;
    std::map<std::string, std::string> defines;
};

struct ComputeConfig {
    MathFidelity math_fidelity = MathFidelity::HiFi4;
    bool fp32_dest_acc_en = false;
    bool dst_full_sync_en = false;
    std::vector<int> unpack_to_dest_mode;
    bool bfp8_pack_precise = false;
    bool math_approx_mode = false;
    std::vector<std::uint32_t> compile_args;
    std::map<std::string, std::string> defines;
};

struct EthernetConfig {
    std::vector<std::uint32_t> compile_args;
};

class CircularBufferConfig {
public:
    CircularBufferConfig(std::uint32_t total_size,
                         const std::map<std::uint8_t, tt::DataFormat>& data_format_spec)
        : total_size_(total_size), formats_(data_format_spec) {}
    CircularBufferConfig& set_page_size(std::uint8_t buffer_index, std::uint32_t page_size) {
        page_sizes_[buffer_index] = page_size;
        return *this;
    }
    std::uint32_t total_size_;
    std::map<std::uint8_t, tt::DataFormat> formats_;
    std::map<std::uint8_t, std::uint32_t> page_sizes_;
};

namespace sim_detail {
inline std::vector<CoreCoord> cores_of(const CoreSpec& spec) {
    std::vector<CoreRange> ranges;
    if (auto* c = std::get_if<CoreCoord>(&spec)) ranges.push_back(CoreRange(*c));
    if (auto* r = std::get_if<CoreRange>(&spec)) ranges.push_back(*r);
    if (auto* s = std::get_if<CoreRangeSet>(&spec)) ranges = s->ranges();
    std::vector<CoreCoord> cores;
    for (const CoreRange& r : ranges)
        for (std::size_t x = r.start_coord.x; x <= r.end_coord.x; ++x)
            for (std::size_t y = r.start_coord.y; y <= r.end_coord.y; ++y) cores.emplace_back(x, y);
    return cores;
}

struct KernelRecord {
    std::string path;
    std::vector<CoreCoord> cores;
};
}  // namespace sim_detail

class Program {
public:
    Program() = default;
    Program(Program&&) noexcept = default;
    Program& operator=(Program&&) noexcept = default;
    Program(const Program&) = delete;

    std::vector<std::pair<std::vector<CoreCoord>, CircularBufferConfig>> cbs;
    std::vector<sim_detail::KernelRecord> kernels;
    mutable std::map<std::pair<KernelHandle, CoreCoord>, std::vector<std::uint32_t>> runtime_args;
};

inline Program CreateProgram() { return Program(); }

inline KernelHandle CreateKernel(
    Program& program, const std::string& file_name, const CoreSpec& core_spec,
    const std::variant<DataMovementConfig, ComputeConfig, EthernetConfig>& config) {
    (void)config;
    if (sim::registry().count(file_name) == 0) sim::fail("no kernel registered for " + file_name);
    program.kernels.push_back({file_name, sim_detail::cores_of(core_spec)});
    return static_cast<KernelHandle>(program.kernels.size() - 1);
}

inline CBHandle CreateCircularBuffer(Program& program, const CoreSpec& core_spec,
                                     const CircularBufferConfig& config) {
    program.cbs.emplace_back(sim_detail::cores_of(core_spec), config);
    return program.cbs.size();
}

inline void SetRuntimeArgs(const Program& program, KernelHandle kernel, const CoreSpec& core_spec,
                           const std::vector<std::uint32_t>& runtime_args) {
    for (const CoreCoord& core : sim_detail::cores_of(core_spec)) program.runtime_args[{kernel, core}] = runtime_args;
}

inline void SetRuntimeArgs(const Program& program, KernelHandle kernel, const CoreSpec& core_spec,
                           std::initializer_list<std::uint32_t> runtime_args) {
    SetRuntimeArgs(program, kernel, core_spec, std::vector<std::uint32_t>(runtime_args));
}

}  // namespace tt::tt_metal
