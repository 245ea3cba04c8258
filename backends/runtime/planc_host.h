// planc runtime, host side: the command line of an emitted program and its tensor files.
//
//   PROGRAM INPUT_DIR OUTPUT_DIR [--iterations N] [--warmup N]
//
// Every input tensor is read from INPUT_DIR/t<Id>.bin and every output tensor written to
// OUTPUT_DIR/t<Id>.bin: the tensor's elements in row-major order of its Shape, densely, each in
// its stored type (little-endian; fp16 and bf16 as their 16-bit patterns). tensors.json next to
// the program lists them. Tensors are windows of the one arena (shape, element strides, byte
// offset), so files are scattered into and gathered from strided memory.
#pragma once

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace planc {

struct TensorFile {
  int id;
  const char* dtype;
  int element_bytes;
  long long shape[4];    // padded to 4 dims with leading 1s
  long long strides[4];  // elements
  long long offset;      // bytes into the arena
};

struct Options {
  std::string inputs, outputs;
  int iterations = 1;
  int warmup = 0;
};

[[noreturn]] inline void fail(const char* format, ...) {
  std::va_list args;
  va_start(args, format);
  std::fputs("planc: error: ", stderr);
  std::vfprintf(stderr, format, args);
  std::fputc('\n', stderr);
  va_end(args);
  std::exit(1);
}

inline int positive_int(const char* flag, const char* text, int minimum) {
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < minimum || value > 1000000)
    fail("%s expects an integer >= %d, got '%s'", flag, minimum, text);
  return static_cast<int>(value);
}

inline Options parse_options(int argc, char** argv) {
  Options options;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "--iterations" || arg == "--warmup") && i + 1 < argc) {
      const int minimum = arg == "--iterations" ? 1 : 0;
      (arg == "--iterations" ? options.iterations : options.warmup) =
          positive_int(arg.c_str(), argv[++i], minimum);
    } else if (arg == "-h" || arg == "--help") {
      std::printf("usage: %s INPUT_DIR OUTPUT_DIR [--iterations N] [--warmup N]\n", argv[0]);
      std::exit(0);
    } else if (!arg.empty() && arg[0] == '-') {
      fail("unknown option '%s' (usage: %s INPUT_DIR OUTPUT_DIR [--iterations N] "
           "[--warmup N])", arg.c_str(), argv[0]);
    } else {
      positional.push_back(arg);
    }
  }
  if (positional.size() != 2)
    fail("expected INPUT_DIR and OUTPUT_DIR (usage: %s INPUT_DIR OUTPUT_DIR "
         "[--iterations N] [--warmup N])", argv[0]);
  options.inputs = positional[0];
  options.outputs = positional[1];
  return options;
}

inline long long element_count(const TensorFile& t) {
  return t.shape[0] * t.shape[1] * t.shape[2] * t.shape[3];
}

// Calls copy(arena byte offset, file byte offset, bytes) for each contiguous run of `t`.
template <class Copy>
void for_each_run(const TensorFile& t, Copy copy) {
  const bool rows = t.strides[3] == 1;
  const long long run = rows ? t.shape[3] : 1;
  long long file_offset = 0;
  for (long long i0 = 0; i0 < t.shape[0]; ++i0)
    for (long long i1 = 0; i1 < t.shape[1]; ++i1)
      for (long long i2 = 0; i2 < t.shape[2]; ++i2)
        for (long long i3 = 0; i3 < t.shape[3]; i3 += run) {
          const long long element =
              i0 * t.strides[0] + i1 * t.strides[1] + i2 * t.strides[2] + i3 * t.strides[3];
          copy(t.offset + element * t.element_bytes, file_offset, run * t.element_bytes);
          file_offset += run * t.element_bytes;
        }
}

inline std::string tensor_path(const std::string& dir, int id) {
  return (std::filesystem::path(dir) / ("t" + std::to_string(id) + ".bin")).string();
}

inline void load_inputs(char* arena, const TensorFile* tensors, int count,
                        const std::string& dir) {
  for (int i = 0; i < count; ++i) {
    const TensorFile& t = tensors[i];
    const std::string path = tensor_path(dir, t.id);
    const long long expected = element_count(t) * t.element_bytes;
    std::error_code error;
    const auto size = std::filesystem::file_size(path, error);
    if (error)
      fail("%s: cannot read input tensor %d: %s", path.c_str(), t.id, error.message().c_str());
    if (static_cast<long long>(size) != expected)
      fail("%s: input tensor %d (%s, %lld elements) needs %lld bytes, the file has %lld",
           path.c_str(), t.id, t.dtype, element_count(t), expected, static_cast<long long>(size));
    std::vector<char> data(static_cast<size_t>(expected));
    std::FILE* file = std::fopen(path.c_str(), "rb");
    const bool read = file && std::fread(data.data(), 1, data.size(), file) == data.size();
    if (file) std::fclose(file);
    if (!read) fail("%s: cannot read input tensor %d", path.c_str(), t.id);
    for_each_run(t, [&](long long at, long long from, long long bytes) {
      std::memcpy(arena + at, data.data() + from, static_cast<size_t>(bytes));
    });
  }
}

inline void save_outputs(const char* arena, const TensorFile* tensors, int count,
                         const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error)
    fail("%s: cannot create the output directory: %s", dir.c_str(), error.message().c_str());
  for (int i = 0; i < count; ++i) {
    const TensorFile& t = tensors[i];
    std::vector<char> data(static_cast<size_t>(element_count(t) * t.element_bytes));
    for_each_run(t, [&](long long at, long long to, long long bytes) {
      std::memcpy(data.data() + to, arena + at, static_cast<size_t>(bytes));
    });
    const std::string path = tensor_path(dir, t.id);
    std::FILE* file = std::fopen(path.c_str(), "wb");
    if (!file || std::fwrite(data.data(), 1, data.size(), file) != data.size())
      fail("%s: cannot write output tensor %d: %s", path.c_str(), t.id, std::strerror(errno));
    std::fclose(file);
  }
}

inline void report_time(double seconds, int iterations) {
  std::printf("planc: %d iteration(s) in %.6f s: %.6f s per iteration\n", iterations, seconds,
              seconds / iterations);
}

}  // namespace planc
