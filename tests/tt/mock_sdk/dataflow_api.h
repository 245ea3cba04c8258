// Mock of tt_metal/hw/inc/dataflow_api.h (data movement kernels).
#pragma once
#include <cstddef>
#include <cstdint>

#include "mock_common.h"

constexpr std::uint8_t noc_index = 0;

// TensorAccessorArgs<CTA_OFFSET>: reads its configuration from compile-time args.
template <std::uint32_t CTA_OFFSET, std::uint32_t CRTA_OFFSET = 0>
struct TensorAccessorArgs {
    constexpr TensorAccessorArgs() = default;
    static constexpr std::uint32_t next_compile_time_args_offset() { return CTA_OFFSET + 1; }
    static constexpr std::uint32_t next_common_runtime_args_offset() { return CRTA_OFFSET; }
};

template <typename DSpec>
struct TensorAccessor {
    std::uint64_t bank_base_address;
    std::uint32_t page_size;

    template <std::uint32_t CTA_OFFSET, std::uint32_t CRTA_OFFSET>
    constexpr TensorAccessor(const TensorAccessorArgs<CTA_OFFSET, CRTA_OFFSET>&,
                             const std::size_t bank_base_address_in,
                             const std::uint32_t page_size_in = 0)
        : bank_base_address(bank_base_address_in), page_size(page_size_in) {}

    // The emulator keeps pages contiguous; interleaving over banks does not change results.
    std::uint64_t get_noc_addr(const std::uint32_t page_id, const std::uint32_t offset = 0,
                               std::uint8_t noc = noc_index) const {
        (void)noc;
        return bank_base_address + std::uint64_t{page_id} * page_size + offset;
    }
};
template <std::uint32_t CTA_OFFSET, std::uint32_t CRTA_OFFSET>
TensorAccessor(const TensorAccessorArgs<CTA_OFFSET, CRTA_OFFSET>&, std::size_t, std::uint32_t)
    -> TensorAccessor<TensorAccessorArgs<CTA_OFFSET, CRTA_OFFSET>>;
template <std::uint32_t CTA_OFFSET, std::uint32_t CRTA_OFFSET>
TensorAccessor(const TensorAccessorArgs<CTA_OFFSET, CRTA_OFFSET>&, std::size_t)
    -> TensorAccessor<TensorAccessorArgs<CTA_OFFSET, CRTA_OFFSET>>;

// Circular buffers
inline void cb_reserve_back(std::int32_t operand, std::int32_t num_pages) { sim::cb_reserve(operand, num_pages); }
inline void cb_push_back(const std::int32_t operand, const std::int32_t num_pages) { sim::cb_push(operand, num_pages); }
inline void cb_wait_front(std::int32_t operand, std::int32_t num_pages) { sim::cb_wait(operand, num_pages); }
inline void cb_pop_front(std::int32_t operand, std::int32_t num_pages) { sim::cb_pop(operand, num_pages); }
inline std::uint32_t get_write_ptr(std::uint32_t operand) { return sim::cb_write_ptr(operand); }
inline std::uint32_t get_read_ptr(std::uint32_t operand) { return sim::cb_read_ptr(operand); }
inline std::uint32_t get_tile_size(const std::int32_t operand) { return sim::cb_page_size(operand); }

// NoC transfers (complete immediately in the emulator; barriers have nothing to wait for)
inline void noc_async_read(std::uint64_t src_noc_addr, std::uint32_t dst_local_l1_addr,
                           std::uint32_t size, std::uint8_t noc = noc_index) {
    (void)noc;
    sim::noc_read(src_noc_addr, dst_local_l1_addr, size);
}
inline void noc_async_write(std::uint32_t src_local_l1_addr, std::uint64_t dst_noc_addr,
                            std::uint32_t size, std::uint8_t noc = noc_index) {
    (void)noc;
    sim::noc_write(src_local_l1_addr, dst_noc_addr, size);
}
template <typename AddrGen>
void noc_async_read_tile(const std::uint32_t id, const AddrGen& addrgen,
                         std::uint32_t dst_local_l1_addr, std::uint32_t offset = 0,
                         std::uint8_t noc = noc_index) {
    noc_async_read(addrgen.get_noc_addr(id, offset), dst_local_l1_addr, addrgen.page_size, noc);
}
template <typename AddrGen>
void noc_async_write_tile(const std::uint32_t id, const AddrGen& addrgen,
                          std::uint32_t src_local_l1_addr, std::uint8_t noc = noc_index) {
    noc_async_write(src_local_l1_addr, addrgen.get_noc_addr(id), addrgen.page_size, noc);
}
inline void noc_async_read_barrier(std::uint8_t noc = noc_index) { (void)noc; }
inline void noc_async_write_barrier(std::uint8_t noc = noc_index) { (void)noc; }
