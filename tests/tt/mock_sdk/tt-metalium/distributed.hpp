// Mock of tt-metalium/distributed.hpp: the mesh host API (a unit mesh is one device).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <variant>
#include <vector>

#include "host_api.hpp"

namespace tt::tt_metal::distributed {

class MeshShape {
public:
    MeshShape(std::uint32_t num_rows, std::uint32_t num_cols);
};

class MeshCoordinateRange {
public:
    explicit MeshCoordinateRange(const MeshShape& shape);
};

class MeshCommandQueue;

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
        std::optional<DeviceAddr> address = std::nullopt);
    DeviceAddr address() const;
    DeviceAddr size() const;
};

class MeshDevice {
public:
    static std::shared_ptr<MeshDevice> create_unit_mesh(
        int device_id, std::size_t l1_small_size = 0, std::size_t trace_region_size = 0,
        std::size_t num_command_queues = 1);
    MeshCommandQueue& mesh_command_queue(std::optional<std::uint8_t> cq_id = std::nullopt) const;
    const MeshShape& shape() const;
    bool close();
};

class MeshWorkload {
public:
    MeshWorkload();
    void add_program(const MeshCoordinateRange& device_range, Program&& program);
};

template <typename DType>
void EnqueueWriteMeshBuffer(MeshCommandQueue& mesh_cq, std::shared_ptr<MeshBuffer>& mesh_buffer,
                            std::vector<DType>& src, bool blocking = false);

template <typename DType>
void EnqueueReadMeshBuffer(MeshCommandQueue& mesh_cq, std::vector<DType>& dst,
                           std::shared_ptr<MeshBuffer>& mesh_buffer, bool blocking = true);

void EnqueueMeshWorkload(MeshCommandQueue& mesh_cq, MeshWorkload& mesh_workload, bool blocking);

void Finish(MeshCommandQueue& mesh_cq);

}  // namespace tt::tt_metal::distributed
