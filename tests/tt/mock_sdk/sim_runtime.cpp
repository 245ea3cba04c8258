// The emulator's kernel-side functions (declared in sim_api.h).
#include <cmath>
#include <string>

#include "sim_runtime.hpp"

namespace sim {

namespace {

Core& core() {
    if (current.core == nullptr) fail("kernel API called outside a kernel");
    return *current.core;
}

std::string cb_name(std::uint32_t id) { return "c_" + std::to_string(id); }

std::uint8_t* l1(std::uint32_t address, std::uint32_t size) {
    if (std::uint64_t{address} + size > kL1Bytes) fail(core().name + ": L1 access out of range");
    return core().l1.data() + address;
}

// The page `index` pages after the front (compute kernels index into waited-for pages).
std::uint8_t* front_page(std::uint32_t id, std::uint32_t index) {
    Core& c = core();
    std::lock_guard<std::mutex> lock(c.mutex);
    CircularBuffer& cb = c.cb(id);
    if (index >= cb.filled) fail(c.name + ": tile " + std::to_string(index) + " of " + cb_name(id) + " is not in the CB");
    return c.l1.data() + cb.base + ((cb.read_page + index) % cb.pages) * cb.page_size;
}

TileValues front(std::uint32_t id, std::uint32_t index) {
    return unpack(front_page(id, index), core().cb(id).format);
}

TileValues& dst(std::uint32_t index) {
    if (index >= current.dst.size()) fail("DST index out of range");
    return current.dst[index];
}

float apply(Binary op, float a, float b) {
    switch (op) {
        case Binary::Add: return a + b;
        case Binary::Sub: return a - b;
        case Binary::Mul: return a * b;
    }
    return 0.0f;
}

}  // namespace

bool register_kernel(const char* path, KernelFunction function) {
    registry()[path] = function;
    return true;
}

std::uint32_t arg(int index) {
    if (current.args == nullptr || index < 0 || static_cast<std::size_t>(index) >= current.args->size()) {
        fail("get_arg_val(" + std::to_string(index) + "): no such runtime argument");
    }
    return (*current.args)[static_cast<std::size_t>(index)];
}

void cb_reserve(std::uint32_t id, std::uint32_t n) {
    Core& c = core();
    std::unique_lock<std::mutex> lock(c.mutex);
    CircularBuffer& cb = c.cb(id);
    if (n > cb.pages) fail(c.name + ": reserving " + std::to_string(n) + " pages of " + cb_name(id) + ", which has " + std::to_string(cb.pages));
    c.wait(lock, [&] { return cb.pages - cb.filled >= n; }, "cb_reserve_back(" + cb_name(id) + ") never gets space");
    cb.reserved = n;
}

void cb_push(std::uint32_t id, std::uint32_t n) {
    Core& c = core();
    std::lock_guard<std::mutex> lock(c.mutex);
    CircularBuffer& cb = c.cb(id);
    if (n > cb.pages - cb.filled) fail(c.name + ": pushing more pages than " + cb_name(id) + " has free");
    cb.write_page = (cb.write_page + n) % cb.pages;
    cb.filled += n;
    cb.reserved = 0;
    c.changed.notify_all();
}

void cb_wait(std::uint32_t id, std::uint32_t n) {
    Core& c = core();
    std::unique_lock<std::mutex> lock(c.mutex);
    CircularBuffer& cb = c.cb(id);
    if (n > cb.pages) fail(c.name + ": waiting for " + std::to_string(n) + " pages of " + cb_name(id) + ", which has " + std::to_string(cb.pages));
    c.wait(lock, [&] { return cb.filled >= n; }, "cb_wait_front(" + cb_name(id) + ") never gets data");
}

void cb_pop(std::uint32_t id, std::uint32_t n) {
    Core& c = core();
    std::lock_guard<std::mutex> lock(c.mutex);
    CircularBuffer& cb = c.cb(id);
    if (n > cb.filled) fail(c.name + ": popping more pages than " + cb_name(id) + " holds");
    cb.read_page = (cb.read_page + n) % cb.pages;
    cb.filled -= n;
    c.changed.notify_all();
}

std::uint32_t cb_write_ptr(std::uint32_t id) {
    Core& c = core();
    std::lock_guard<std::mutex> lock(c.mutex);
    CircularBuffer& cb = c.cb(id);
    return cb.base + cb.write_page * cb.page_size;
}

std::uint32_t cb_read_ptr(std::uint32_t id) {
    Core& c = core();
    std::lock_guard<std::mutex> lock(c.mutex);
    CircularBuffer& cb = c.cb(id);
    return cb.base + cb.read_page * cb.page_size;
}

std::uint32_t cb_page_size(std::uint32_t id) { return core().cb(id).page_size; }

void noc_read(std::uint64_t src, std::uint32_t dst_l1, std::uint32_t size) {
    std::memcpy(l1(dst_l1, size), memory().at(src, size), size);
}

void noc_write(std::uint32_t src_l1, std::uint64_t dst_addr, std::uint32_t size) {
    std::memcpy(memory().at(dst_addr, size), l1(src_l1, size), size);
}

void dst_zero() {
    for (TileValues& tile : current.dst) tile.fill(0.0f);
}

void set_transpose_b(bool transpose) { current.transpose_b = transpose; }

void copy_tile(std::uint32_t cb, std::uint32_t tile, std::uint32_t index) { dst(index) = front(cb, tile); }

void pack_tile(std::uint32_t index, std::uint32_t id, std::uint32_t tile) {
    Core& c = core();
    std::uint8_t* page;
    Format format;
    {
        std::lock_guard<std::mutex> lock(c.mutex);
        CircularBuffer& cb = c.cb(id);
        if (tile >= cb.reserved) fail(c.name + ": pack_tile into " + cb_name(id) + " without cb_reserve_back");
        page = c.l1.data() + cb.base + ((cb.write_page + tile) % cb.pages) * cb.page_size;
        format = cb.format;
    }
    pack(dst(index), page, format);
}

void matmul_tiles(std::uint32_t in0, std::uint32_t in1, std::uint32_t tile0, std::uint32_t tile1,
                  std::uint32_t index) {
    const TileValues a = front(in0, tile0), b = front(in1, tile1);
    TileValues& out = dst(index);
    const bool t = current.transpose_b;  // mm_init's transpose: each B tile is transposed
    for (std::uint32_t r = 0; r < kTile; ++r) {
        for (std::uint32_t col = 0; col < kTile; ++col) {
            float sum = 0.0f;
            for (std::uint32_t k = 0; k < kTile; ++k) sum += a[r * kTile + k] * (t ? b[col * kTile + k] : b[k * kTile + col]);
            out[r * kTile + col] += sum;  // DST accumulates
        }
    }
}

void binary_tiles(Binary op, Bcast bcast, std::uint32_t in0, std::uint32_t in1, std::uint32_t tile0,
                  std::uint32_t tile1, std::uint32_t index) {
    const TileValues a = front(in0, tile0), b = front(in1, tile1);
    TileValues& out = dst(index);
    for (std::uint32_t r = 0; r < kTile; ++r) {
        for (std::uint32_t col = 0; col < kTile; ++col) {
            // ROW broadcasts B's row 0 over all rows, COL its column 0, SCALAR its [0, 0].
            const std::uint32_t br = (bcast == Bcast::Row || bcast == Bcast::Scalar) ? 0 : r;
            const std::uint32_t bc = (bcast == Bcast::Col || bcast == Bcast::Scalar) ? 0 : col;
            out[r * kTile + col] = apply(op, a[r * kTile + col], b[br * kTile + bc]);
        }
    }
}

void unary_tile(Unary op, std::uint32_t index) {
    for (float& x : dst(index)) {
        switch (op) {
            case Unary::Exp: x = std::exp(x); break;
            case Unary::Gelu: x = 0.5f * x * (1.0f + std::tanh(0.7978845608f * (x + 0.044715f * x * x * x))); break;
            case Unary::Relu: x = x > 0.0f ? x : 0.0f; break;
            case Unary::Rsqrt: x = 1.0f / std::sqrt(x); break;
            case Unary::Sigmoid: x = 1.0f / (1.0f + std::exp(-x)); break;
            case Unary::Sqrt: x = std::sqrt(x); break;
        }
    }
}

void scalar_tile(Binary op, std::uint32_t index, std::uint32_t bits) {
    float s;
    std::memcpy(&s, &bits, 4);
    for (float& x : dst(index)) x = apply(op, x, s);
}

}  // namespace sim
