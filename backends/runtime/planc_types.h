// planc runtime: element types and their conversions (shared by the CPU and CUDA targets).
//
// Tensors are stored in their own element type and computed in float (floating types) or
// 64-bit integers (integer types), as planc's numpy reference interpreter does. Every store
// rounds to the stored type: to nearest even for fp16 and bf16, and to nearest with saturation
// for integers. fp16 and bf16 are 16-bit patterns; their conversions are exact bit
// manipulations on the CPU (no compiler or hardware support for half types is assumed) and
// the conversion instructions on the GPU, which round the same way.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#define PLANC_HD __host__ __device__ __forceinline__
#define PLANC_DEV __device__ __forceinline__
#define PLANC_UNROLL _Pragma("unroll")
#else
#define PLANC_HD inline
#define PLANC_DEV inline
#define PLANC_UNROLL
#endif

namespace planc {

struct fp16 { uint16_t bits; };
struct bf16 { uint16_t bits; };

PLANC_HD uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

PLANC_HD float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// IEEE binary16 from binary32, round to nearest even (F. Giesen's branch-light algorithm; it
// relies on float addition rounding to nearest even, so never build with -ffast-math).
PLANC_HD uint16_t half_bits_from_float(float value) {
#if defined(__CUDA_ARCH__)
  return __half_as_ushort(__float2half_rn(value));
#else
  const uint32_t f32_infinity = 255u << 23;
  const uint32_t f16_overflow = (127u + 16u) << 23;
  const uint32_t denormal_magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  uint32_t f = float_bits(value);
  const uint32_t sign = f & 0x80000000u;
  f ^= sign;
  uint16_t out;
  if (f >= f16_overflow) {
    out = f > f32_infinity ? 0x7e00 : 0x7c00;
  } else if (f < (113u << 23)) {
    // Subnormal or zero: adding the magic number aligns the 10 mantissa bits at the bottom
    // and rounds them, to nearest even, in the float unit.
    out = static_cast<uint16_t>(float_bits(bits_float(f) + bits_float(denormal_magic)) -
                                denormal_magic);
  } else {
    const uint32_t odd = (f >> 13) & 1u;
    f += (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu;
    f += odd;
    out = static_cast<uint16_t>(f >> 13);
  }
  return static_cast<uint16_t>(out | (sign >> 16));
#endif
}

PLANC_HD float float_from_half_bits(uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#else
  const uint32_t shifted_exponent = 0x7c00u << 13;
  uint32_t out = (static_cast<uint32_t>(h) & 0x7fffu) << 13;
  const uint32_t exponent = shifted_exponent & out;
  out += (127u - 15u) << 23;
  if (exponent == shifted_exponent) {
    out += (128u - 16u) << 23;  // inf or nan
  } else if (exponent == 0) {
    out += 1u << 23;  // zero or subnormal: renormalise in the float unit
    out = float_bits(bits_float(out) - bits_float(113u << 23));
  }
  return bits_float(out | ((static_cast<uint32_t>(h) & 0x8000u) << 16));
#endif
}

// bfloat16 is the top half of a float; rounding to nearest even is one add (as
// __float2bfloat16_rn does), and every nan becomes the canonical quiet nan.
PLANC_HD uint16_t bf16_bits_from_float(float value) {
  const uint32_t u = float_bits(value);
  if (value != value) return 0x7fc0;
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

PLANC_HD float float_from_bf16_bits(uint16_t b) {
  return bits_float(static_cast<uint32_t>(b) << 16);
}

// -- compute types ---------------------------------------------------------------------------

template <class T>
struct compute_type { using type = std::conditional_t<std::is_integral<T>::value, int64_t, T>; };
template <> struct compute_type<fp16> { using type = float; };
template <> struct compute_type<bf16> { using type = float; };
template <class T> using compute_t = typename compute_type<T>::type;

// What a transcendental function or a division of X computes in: integers widen to double, as
// numpy's do on int64 values.
template <class X> using real_t = std::conditional_t<std::is_integral<X>::value, double, X>;

PLANC_HD float to_compute(fp16 v) { return float_from_half_bits(v.bits); }
PLANC_HD float to_compute(bf16 v) { return float_from_bf16_bits(v.bits); }
PLANC_HD float to_compute(float v) { return v; }
template <class T, std::enable_if_t<std::is_integral<T>::value, int> = 0>
PLANC_HD int64_t to_compute(T v) { return static_cast<int64_t>(v); }

template <class T> PLANC_HD float as_float(T v) { return static_cast<float>(to_compute(v)); }

// Stores: `store_as<T>(x)` rounds a computed value into element type T.
template <class T> struct Store;

template <> struct Store<float> {
  template <class X> PLANC_HD static float of(X x) { return static_cast<float>(x); }
};
template <> struct Store<fp16> {
  template <class X> PLANC_HD static fp16 of(X x) {
    return fp16{half_bits_from_float(static_cast<float>(x))};
  }
};
template <> struct Store<bf16> {
  template <class X> PLANC_HD static bf16 of(X x) {
    return bf16{bf16_bits_from_float(static_cast<float>(x))};
  }
};

// Integers: floating values round to nearest (even) first; everything saturates. (The bounds
// are spelled out because std::numeric_limits is not usable in CUDA device code.)
template <class T, int64_t Lo, int64_t Hi> struct StoreInteger {
  PLANC_HD static T of(int64_t x) { return static_cast<T>(x < Lo ? Lo : (x > Hi ? Hi : x)); }
  PLANC_HD static T of(double x) {
    if (x != x) return T(0);
    const double r = rint(x);
    return static_cast<T>(r < double(Lo) ? Lo : (r > double(Hi) ? Hi : static_cast<int64_t>(r)));
  }
  PLANC_HD static T of(float x) { return of(static_cast<double>(x)); }
};
template <> struct Store<int32_t> : StoreInteger<int32_t, -2147483647 - 1, 2147483647> {};
template <> struct Store<uint32_t> : StoreInteger<uint32_t, 0, 4294967295LL> {};
template <> struct Store<int8_t> : StoreInteger<int8_t, -128, 127> {};
template <> struct Store<uint8_t> : StoreInteger<uint8_t, 0, 255> {};

template <class T, class X> PLANC_HD T store_as(X x) { return Store<T>::of(x); }

// A typed pointer into the arena at a byte offset.
template <class T> PLANC_HD T* at(char* arena, long long byte_offset) {
  return reinterpret_cast<T*>(arena + byte_offset);
}

}  // namespace planc
