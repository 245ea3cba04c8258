// Mock of tt-metalium/distributed.hpp: the mesh host API (a unit mesh is one device). Buffers
// live in the emulator's device memory; a workload runs every core's kernels as threads.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>
#include <variant>
#include <vector>

#include "host_api.hpp"

namespace tt::tt_metal::distributed {

class MeshShape {
public:
    MeshShape(std::uint32_t num_rows, std::uint32_t num_cols) : rows(num_rows), cols(num_cols) {}
    std::uint32_t rows, cols;
};

class MeshCoordinateRange {
public:
    explicit MeshCoordinateRange(const MeshShape& shape) { (void)shape; }
};

class MeshCommandQueue {};

struct ReplicatedBufferConfig {
    DeviceAddr size = 0;
};

struct ShardedBufferConfig {
    DeviceAddr global_size = 0;
};

using MeshBufferConfig = std::variant<ReplicatedBufferConfig, ShardedBufferConfig>;

struct DeviceLocalBufferConfig {
    DeviceAddr page_size = 0;
    BufferType buffer_type = BufferType::DRAM;
    std::optional<bool> bottom_up;
};

class MeshDevice;

class MeshBuffer {
public:
    static std::shared_ptr<MeshBuffer> create(
        const MeshBufferConfig& mesh_buffer_config,
        const DeviceLocalBufferConfig& device_local_layout, MeshDevice* mesh_device,
        std::optional<DeviceAddr> address = std::nullopt) {
        (void)mesh_device, (void)address;
        auto buffer = std::make_shared<MeshBuffer>();
        buffer->size_ = std::get<ReplicatedBufferConfig>(mesh_buffer_config).size;
        if (device_local_layout.page_size == 0 || buffer->size_ % device_local_layout.page_size != 0) {
            sim::fail("buffer size is not a multiple of its page size");
        }
        buffer->address_ = sim::memory().allocate(buffer->size_);
        return buffer;
    }
    DeviceAddr address() const { return address_; }
    DeviceAddr size() const { return size_; }

private:
    DeviceAddr address_ = 0, size_ = 0;
};

class MeshDevice {
public:
    static std::shared_ptr<MeshDevice> create_unit_mesh(
        int device_id, std::size_t l1_small_size = 0, std::size_t trace_region_size = 0,
        std::size_t num_command_queues = 1) {
        (void)device_id, (void)l1_small_size, (void)trace_region_size, (void)num_command_queues;
        return std::make_shared<MeshDevice>();
    }
    MeshCommandQueue& mesh_command_queue(std::optional<std::uint8_t> cq_id = std::nullopt) const {
        (void)cq_id;
        static MeshCommandQueue queue;
        return queue;
    }
    const MeshShape& shape() const { return shape_; }
    bool close() { return true; }

private:
    MeshShape shape_{1, 1};
};

class MeshWorkload {
public:
    MeshWorkload() = default;
    void add_program(const MeshCoordinateRange& device_range, Program&& program) {
        (void)device_range;
        programs.push_back(std::move(program));
    }
    std::vector<Program> programs;
};

template <typename DType>
void EnqueueWriteMeshBuffer(MeshCommandQueue& mesh_cq, std::shared_ptr<MeshBuffer>& mesh_buffer,
                            std::vector<DType>& src, bool blocking = false) {
    (void)mesh_cq, (void)blocking;
    const std::size_t bytes = src.size() * sizeof(DType);
    if (bytes > mesh_buffer->size()) sim::fail("write larger than the buffer");
    std::memcpy(sim::memory().at(mesh_buffer->address(), bytes), src.data(), bytes);
}

template <typename DType>
void EnqueueReadMeshBuffer(MeshCommandQueue& mesh_cq, std::vector<DType>& dst,
                           std::shared_ptr<MeshBuffer>& mesh_buffer, bool blocking = true) {
    (void)mesh_cq, (void)blocking;
    dst.resize(mesh_buffer->size() / sizeof(DType));
    std::memcpy(dst.data(), sim::memory().at(mesh_buffer->address(), mesh_buffer->size()),
                mesh_buffer->size());
}

namespace sim_detail {
inline void run_core(const Program& program, const CoreCoord& where) {
    sim::Core core;
    core.name = "core (" + std::to_string(where.x) + "," + std::to_string(where.y) + ")";
    for (const auto& [cores, config] : program.cbs) {
        bool here = false;
        for (const CoreCoord& c : cores) here = here || (c.x == where.x && c.y == where.y);
        if (!here) continue;
        for (const auto& [index, format] : config.formats_) {
            sim::CircularBuffer& cb = core.cbs[index];
            cb.page_size = config.page_sizes_.at(index);
            cb.pages = config.total_size_ / cb.page_size;
            cb.format = static_cast<sim::Format>(format);
            cb.base = core.next_l1;
            cb.configured = true;
            core.next_l1 += config.total_size_;
            if (core.next_l1 > sim::kL1Bytes) sim::fail(core.name + ": circular buffers exceed L1");
        }
    }
    std::vector<std::thread> threads;
    static const std::vector<std::uint32_t> no_args;
    for (std::size_t k = 0; k < program.kernels.size(); ++k) {
        const auto& kernel = program.kernels[k];
        bool here = false;
        for (const CoreCoord& c : kernel.cores) here = here || (c.x == where.x && c.y == where.y);
        if (!here) continue;
        auto found = program.runtime_args.find({static_cast<KernelHandle>(k), where});
        const std::vector<std::uint32_t>* args = found == program.runtime_args.end() ? &no_args : &found->second;
        sim::KernelFunction function = sim::registry().at(kernel.path);
        threads.emplace_back([&core, args, function] {
            sim::current.core = &core;
            sim::current.args = args;
            function();
        });
    }
    for (std::thread& t : threads) t.join();
}
}  // namespace sim_detail

inline void EnqueueMeshWorkload(MeshCommandQueue& mesh_cq, MeshWorkload& mesh_workload, bool blocking) {
    (void)mesh_cq, (void)blocking;
    for (const Program& program : mesh_workload.programs) {
        std::set<CoreCoord> cores;
        for (const auto& kernel : program.kernels) cores.insert(kernel.cores.begin(), kernel.cores.end());
        for (const CoreCoord& core : cores) sim_detail::run_core(program, core);
    }
}

inline void Finish(MeshCommandQueue& mesh_cq) { (void)mesh_cq; }

}  // namespace tt::tt_metal::distributed
