// The scalar types of detfuzz's own kernels and their explicit precision policy: each element
// function loads its inputs into the accumulate type (fp32 for fp16/bf16/fp32, fp64 for fp64),
// computes there, and stores once. nvcc compiles these headers for the device; the host
// compiler for host emulation, with the same conversions (round to nearest even).
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define DETFUZZ_HD __host__ __device__
#else
#define DETFUZZ_HD
#endif

#if defined(__CUDACC__) || defined(DETFUZZ_HAVE_CUDA_HEADERS)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#else
#include "model/dtype.h"  // round_to: the conversions without the CUDA headers
#endif

// The element functions and launchers live in an inline namespace named after how their
// arithmetic was compiled, so that host_launch.cpp can be compiled twice into one program:
// as the compiler contracts by default (as_compiled), and once more with FMA contraction
// (fma_contracted: what nvcc's --fmad=true does on the device), without the two sets of
// template instances colliding.
#ifndef DETFUZZ_NATIVE_ARITHMETIC
#define DETFUZZ_NATIVE_ARITHMETIC as_compiled
#endif

namespace detfuzz::native {

#if defined(__CUDACC__) || defined(DETFUZZ_HAVE_CUDA_HEADERS)
using half_t = __half;
using bfloat16_t = __nv_bfloat16;
#else
// Host-only stand-ins when the CUDA toolkit is absent: a float that holds a value
// representable in the format; stored through detfuzz's exact rounding.
struct half_t {
  float value;
};
struct bfloat16_t {
  float value;
};
#endif

template <class T>
struct Scalar;

template <>
struct Scalar<float> {
  using acc_t = float;
  static DETFUZZ_HD acc_t load(float v) { return v; }
  static DETFUZZ_HD float store(acc_t v) { return v; }
};

template <>
struct Scalar<double> {
  using acc_t = double;
  static DETFUZZ_HD acc_t load(double v) { return v; }
  static DETFUZZ_HD double store(acc_t v) { return v; }
};

template <>
struct Scalar<half_t> {
  using acc_t = float;
#if defined(__CUDACC__) || defined(DETFUZZ_HAVE_CUDA_HEADERS)
  static DETFUZZ_HD acc_t load(half_t v) { return __half2float(v); }
  static DETFUZZ_HD half_t store(acc_t v) { return __float2half_rn(v); }
#else
  static acc_t load(half_t v) { return v.value; }
  static half_t store(acc_t v) { return {static_cast<float>(round_to(DType::fp16, v))}; }
#endif
};

template <>
struct Scalar<bfloat16_t> {
  using acc_t = float;
#if defined(__CUDACC__) || defined(DETFUZZ_HAVE_CUDA_HEADERS)
  static DETFUZZ_HD acc_t load(bfloat16_t v) { return __bfloat162float(v); }
  static DETFUZZ_HD bfloat16_t store(acc_t v) { return __float2bfloat16_rn(v); }
#else
  static acc_t load(bfloat16_t v) { return v.value; }
  static bfloat16_t store(acc_t v) { return {static_cast<float>(round_to(DType::bf16, v))}; }
#endif
};

template <class T>
using acc_of = typename Scalar<T>::acc_t;

template <class A>
DETFUZZ_HD A max_of(A a, A b) {
  return a > b ? a : b;
}
template <class A>
DETFUZZ_HD A min_of(A a, A b) {
  return a < b ? a : b;
}

// Rounding as C's round/floor/ceil in the accumulate type, on host and device alike.
DETFUZZ_HD inline float round_half_away(float x) { return ::roundf(x); }
DETFUZZ_HD inline double round_half_away(double x) { return ::round(x); }
DETFUZZ_HD inline float floor_of(float x) { return ::floorf(x); }
DETFUZZ_HD inline double floor_of(double x) { return ::floor(x); }
DETFUZZ_HD inline float ceil_of(float x) { return ::ceilf(x); }
DETFUZZ_HD inline double ceil_of(double x) { return ::ceil(x); }
// A product rounded on its own, never fused into an FMA with the sum it feeds: an area in
// `area_a + area_b - inter` fused by nvcc --fmad=true (or -ffp-contract=fast) makes one of two
// symmetric products exact and the other rounded, so IoU(a, b) != IoU(b, a) (native:fma found
// it). __fmul_rn / __dmul_rn on the device; a volatile store on the host.
DETFUZZ_HD inline float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  volatile float product = a * b;
  return product;
#endif
}
DETFUZZ_HD inline double mul_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  volatile double product = a * b;
  return product;
#endif
}
DETFUZZ_HD inline float abs_of(float x) { return ::fabsf(x); }
DETFUZZ_HD inline double abs_of(double x) { return ::fabs(x); }

}  // namespace detfuzz::native
