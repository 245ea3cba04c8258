// The CPU emulation behind the mock SDK: device memory, cores with L1 and circular buffers,
// DST registers, and the kernel registry. Kernels of one core run as three threads (reader,
// compute, writer) that block on circular buffers as on the device; a wait that lasts longer
// than a few seconds is reported as a deadlock.
#pragma once
#include <array>
#include <chrono>
#include <condition_variable>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "sim_api.h"

namespace sim {

constexpr std::uint32_t kTile = 32;
constexpr std::uint32_t kTileElems = kTile * kTile;
constexpr std::uint32_t kL1Bytes = 1536 * 1024;
constexpr std::uint64_t kDeviceBase = 0x10000000;

// Data formats (tt::DataFormat values) the emulator converts.
enum Format : std::uint8_t { Float32 = 0, Float16 = 1, Float16_b = 5 };

inline float half_to_float(std::uint16_t h) {
    const std::uint32_t sign = (h & 0x8000u) << 16;
    std::uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {  // subnormal
            exp = 127 - 15 + 1;
            while ((mant & 0x400) == 0) { mant <<= 1; --exp; }
            bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

inline std::uint16_t float_to_half(float f) {
    std::uint32_t x;
    std::memcpy(&x, &f, 4);
    const std::uint32_t sign = (x >> 16) & 0x8000;
    const int exp = static_cast<int>((x >> 23) & 0xff) - 127 + 15;
    std::uint32_t mant = x & 0x7fffff;
    if (((x >> 23) & 0xff) == 0xff) return static_cast<std::uint16_t>(sign | 0x7c00 | (mant ? 0x200 : 0));
    if (exp >= 31) return static_cast<std::uint16_t>(sign | 0x7c00);
    if (exp <= 0) {
        if (exp < -10) return static_cast<std::uint16_t>(sign);
        mant |= 0x800000;
        const int shift = 14 - exp;
        std::uint32_t half = mant >> shift;
        const std::uint32_t rest = mant & ((1u << shift) - 1), halfway = 1u << (shift - 1);
        if (rest > halfway || (rest == halfway && (half & 1))) ++half;
        return static_cast<std::uint16_t>(sign | half);
    }
    std::uint32_t half = sign | (static_cast<std::uint32_t>(exp) << 10) | (mant >> 13);
    const std::uint32_t rest = mant & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) ++half;  // may carry into the exponent
    return static_cast<std::uint16_t>(half);
}

inline float bf16_to_float(std::uint16_t b) {
    const std::uint32_t bits = static_cast<std::uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

inline std::uint16_t float_to_bf16(float f) {
    std::uint32_t x;
    std::memcpy(&x, &f, 4);
    if (std::isnan(f)) return 0x7fc0;
    x += 0x7fff + ((x >> 16) & 1);
    return static_cast<std::uint16_t>(x >> 16);
}

inline std::uint32_t format_bytes(Format f) { return f == Float32 ? 4 : 2; }

// Element (row, col) of a tile in tile layout: four 16x16 faces, each row-major.
inline std::uint32_t face_index(std::uint32_t r, std::uint32_t c) {
    return ((r / 16) * 2 + c / 16) * 256 + (r % 16) * 16 + c % 16;
}

using TileValues = std::array<float, kTileElems>;  // logical row-major values

inline TileValues unpack(const std::uint8_t* page, Format f) {
    TileValues t{};
    for (std::uint32_t r = 0; r < kTile; ++r) {
        for (std::uint32_t c = 0; c < kTile; ++c) {
            const std::uint32_t i = face_index(r, c);
            float v;
            if (f == Float32) {
                std::memcpy(&v, page + 4 * i, 4);
            } else {
                std::uint16_t bits;
                std::memcpy(&bits, page + 2 * i, 2);
                v = f == Float16 ? half_to_float(bits) : bf16_to_float(bits);
            }
            t[r * kTile + c] = v;
        }
    }
    return t;
}

inline void pack(const TileValues& t, std::uint8_t* page, Format f) {
    for (std::uint32_t r = 0; r < kTile; ++r) {
        for (std::uint32_t c = 0; c < kTile; ++c) {
            const std::uint32_t i = face_index(r, c);
            const float v = t[r * kTile + c];
            if (f == Float32) {
                std::memcpy(page + 4 * i, &v, 4);
            } else {
                const std::uint16_t bits = f == Float16 ? float_to_half(v) : float_to_bf16(v);
                std::memcpy(page + 2 * i, &bits, 2);
            }
        }
    }
}

[[noreturn]] inline void fail(const std::string& message) {
    std::fprintf(stderr, "emulator: %s\n", message.c_str());
    std::fflush(stderr);
    std::abort();
}

// -- device memory ------------------------------------------------------------------------

struct DeviceMemory {
    std::map<std::uint64_t, std::vector<std::uint8_t>> buffers;
    std::uint64_t next = kDeviceBase;

    std::uint64_t allocate(std::uint64_t size) {
        const std::uint64_t address = next;
        buffers[address] = std::vector<std::uint8_t>(size);
        next += (size + 0xffff) & ~std::uint64_t{0xffff};
        return address;
    }

    std::uint8_t* at(std::uint64_t address, std::uint64_t size) {
        auto it = buffers.upper_bound(address);
        if (it == buffers.begin()) fail("device address out of range");
        --it;
        if (address + size > it->first + it->second.size()) fail("device access past a buffer's end");
        return it->second.data() + (address - it->first);
    }
};

inline DeviceMemory& memory() {
    static DeviceMemory m;
    return m;
}

// -- cores and circular buffers -----------------------------------------------------------

struct CircularBuffer {
    std::uint32_t base = 0, pages = 0, page_size = 0;
    Format format = Float16_b;
    std::uint32_t read_page = 0, write_page = 0, filled = 0, reserved = 0;
    bool configured = false;
};

struct Core {
    std::string name;
    std::vector<std::uint8_t> l1 = std::vector<std::uint8_t>(kL1Bytes);
    std::array<CircularBuffer, 32> cbs{};
    std::mutex mutex;
    std::condition_variable changed;
    std::uint32_t next_l1 = 0;

    CircularBuffer& cb(std::uint32_t id) {
        if (id >= 32 || !cbs[id].configured) fail(name + ": circular buffer c_" + std::to_string(id) + " was not created");
        return cbs[id];
    }

    template <typename Ready>
    void wait(std::unique_lock<std::mutex>& lock, Ready ready, const std::string& what) {
        if (!changed.wait_for(lock, std::chrono::seconds(5), ready)) fail(name + ": deadlock: " + what);
    }
};

struct Thread {
    Core* core = nullptr;
    const std::vector<std::uint32_t>* args = nullptr;
    std::array<TileValues, 16> dst{};
    bool transpose_b = false;
};

inline thread_local Thread current;

// -- kernels ------------------------------------------------------------------------------

inline std::map<std::string, KernelFunction>& registry() {
    static std::map<std::string, KernelFunction> kernels;
    return kernels;
}

}  // namespace sim
