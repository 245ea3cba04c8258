// What the mock kernel headers call: the emulator's kernel-side entry points, declared here
// and defined in sim_runtime.cpp, so that kernels compile against a light header.
#pragma once
#include <cstdint>

namespace sim {

using KernelFunction = void (*)();
bool register_kernel(const char* path, KernelFunction function);

std::uint32_t arg(int index);

void cb_reserve(std::uint32_t cb, std::uint32_t pages);
void cb_push(std::uint32_t cb, std::uint32_t pages);
void cb_wait(std::uint32_t cb, std::uint32_t pages);
void cb_pop(std::uint32_t cb, std::uint32_t pages);
std::uint32_t cb_write_ptr(std::uint32_t cb);
std::uint32_t cb_read_ptr(std::uint32_t cb);
std::uint32_t cb_page_size(std::uint32_t cb);

void noc_read(std::uint64_t src_device_addr, std::uint32_t dst_l1_addr, std::uint32_t size);
void noc_write(std::uint32_t src_l1_addr, std::uint64_t dst_device_addr, std::uint32_t size);

enum class Binary { Add, Sub, Mul };
enum class Bcast { None, Row, Col, Scalar };
enum class Unary { Exp, Gelu, Relu, Rsqrt, Sigmoid, Sqrt };

void dst_zero();
void set_transpose_b(bool transpose);
void copy_tile(std::uint32_t cb, std::uint32_t tile, std::uint32_t dst);
void pack_tile(std::uint32_t dst, std::uint32_t cb, std::uint32_t tile);
void matmul_tiles(std::uint32_t in0, std::uint32_t in1, std::uint32_t tile0, std::uint32_t tile1,
                  std::uint32_t dst);
void binary_tiles(Binary op, Bcast bcast, std::uint32_t in0, std::uint32_t in1,
                  std::uint32_t tile0, std::uint32_t tile1, std::uint32_t dst);
void unary_tile(Unary op, std::uint32_t dst);
void scalar_tile(Binary op, std::uint32_t dst, std::uint32_t float_bits);

}  // namespace sim
