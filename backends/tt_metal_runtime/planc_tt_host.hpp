// planc_tt_host.hpp: what the host programs planc writes need besides TT-Metalium itself.
//
// Tensors travel between files and device buffers. A file holds a tensor row-major in its
// element type (what numpy's tofile() writes); a device buffer holds it in Tenstorrent's tile
// layout: [batch][tile row][tile column] 32x32 tiles, each tile four 16x16 faces (top-left,
// top-right, bottom-left, bottom-right), each face row-major. Ragged edges are zero-padded to
// whole tiles, and cropped again on the way back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace planc {

constexpr std::uint32_t kTile = 32;
constexpr std::uint32_t kFace = 16;

inline std::uint32_t tiles_for(std::uint32_t elements) { return (elements + kTile - 1) / kTile; }

// Position of element (row, col) of one matrix in tile layout, for a matrix col_tiles wide.
inline std::size_t tiled_offset(std::uint32_t row, std::uint32_t col, std::uint32_t col_tiles) {
    const std::size_t tile = static_cast<std::size_t>(row / kTile) * col_tiles + col / kTile;
    const std::uint32_t r = row % kTile, c = col % kTile;
    const std::uint32_t face = (r / kFace) * 2 + c / kFace;
    return tile * kTile * kTile + face * kFace * kFace + (r % kFace) * kFace + c % kFace;
}

// Row-major [batch, rows, cols] elements to zero-padded tiles.
template <typename T>
std::vector<T> to_tiles(const std::vector<T>& values, std::uint32_t batch, std::uint32_t rows,
                        std::uint32_t cols) {
    if (values.size() != static_cast<std::size_t>(batch) * rows * cols) {
        throw std::invalid_argument("to_tiles: wrong number of elements");
    }
    const std::uint32_t row_tiles = tiles_for(rows), col_tiles = tiles_for(cols);
    const std::size_t per_batch = static_cast<std::size_t>(row_tiles) * col_tiles * kTile * kTile;
    std::vector<T> tiles(per_batch * batch, T{});
    for (std::uint32_t b = 0; b < batch; ++b) {
        for (std::uint32_t r = 0; r < rows; ++r) {
            for (std::uint32_t c = 0; c < cols; ++c) {
                tiles[b * per_batch + tiled_offset(r, c, col_tiles)] =
                    values[(static_cast<std::size_t>(b) * rows + r) * cols + c];
            }
        }
    }
    return tiles;
}

// Tiles back to row-major [batch, rows, cols], dropping the padding.
template <typename T>
std::vector<T> from_tiles(const std::vector<T>& tiles, std::uint32_t batch, std::uint32_t rows,
                          std::uint32_t cols) {
    const std::uint32_t row_tiles = tiles_for(rows), col_tiles = tiles_for(cols);
    const std::size_t per_batch = static_cast<std::size_t>(row_tiles) * col_tiles * kTile * kTile;
    if (tiles.size() < per_batch * batch) {
        throw std::invalid_argument("from_tiles: too few elements");
    }
    std::vector<T> values(static_cast<std::size_t>(batch) * rows * cols);
    for (std::uint32_t b = 0; b < batch; ++b) {
        for (std::uint32_t r = 0; r < rows; ++r) {
            for (std::uint32_t c = 0; c < cols; ++c) {
                values[(static_cast<std::size_t>(b) * rows + r) * cols + c] =
                    tiles[b * per_batch + tiled_offset(r, c, col_tiles)];
            }
        }
    }
    return values;
}

// Reads dir/name (batch * rows * cols raw elements) and returns it in tile layout.
template <typename T>
std::vector<T> load_tiles(const std::string& dir, const std::string& name, std::uint32_t batch,
                          std::uint32_t rows, std::uint32_t cols) {
    const std::string path = dir + "/" + name;
    std::ifstream file(path, std::ios::binary);
    if (!file) {
        throw std::runtime_error("cannot open input " + path);
    }
    std::vector<T> values(static_cast<std::size_t>(batch) * rows * cols);
    file.read(reinterpret_cast<char*>(values.data()),
              static_cast<std::streamsize>(values.size() * sizeof(T)));
    if (file.gcount() != static_cast<std::streamsize>(values.size() * sizeof(T))) {
        throw std::runtime_error("input " + path + " is shorter than its tensor");
    }
    return to_tiles(values, batch, rows, cols);
}

// Writes tiles to dir/name as batch * rows * cols raw row-major elements.
template <typename T>
void store_tiles(const std::string& dir, const std::string& name, const std::vector<T>& tiles,
                 std::uint32_t batch, std::uint32_t rows, std::uint32_t cols) {
    const std::string path = dir + "/" + name;
    const std::vector<T> values = from_tiles(tiles, batch, rows, cols);
    std::ofstream file(path, std::ios::binary);
    file.write(reinterpret_cast<const char*>(values.data()),
               static_cast<std::streamsize>(values.size() * sizeof(T)));
    if (!file) {
        throw std::runtime_error("cannot write output " + path);
    }
}

}  // namespace planc
