// mend C++ kernel prelude: storage types, half/bfloat16 conversions and inline, branch-free, vectorizable
// float math (no libm calls in hot loops, no -ffast-math). No C++ standard headers: <cmath> alone costs
// ~0.4 s of g++ time per translation unit; compiler builtins give the same code.
#pragma once
#include <stdint.h>

#define MEND_INF_F __builtin_inff()
#define MEND_NAN_F __builtin_nanf("")
#define MEND_F1(name) \
  static inline float mend_##name(float x) { return __builtin_##name##f(x); } \
  static inline double mend_##name(double x) { return __builtin_##name(x); }
#define MEND_F2(name) \
  static inline float mend_##name(float x, float y) { return __builtin_##name##f(x, y); } \
  static inline double mend_##name(double x, double y) { return __builtin_##name(x, y); }
MEND_F1(exp2) MEND_F1(expm1) MEND_F1(log2) MEND_F1(log10) MEND_F1(log1p) MEND_F1(sqrt)
MEND_F1(sin) MEND_F1(cos) MEND_F1(tan) MEND_F1(asin) MEND_F1(acos) MEND_F1(atan) MEND_F1(sinh) MEND_F1(cosh)
MEND_F1(asinh) MEND_F1(acosh) MEND_F1(atanh) MEND_F1(erfc) MEND_F1(floor) MEND_F1(ceil) MEND_F1(trunc)
MEND_F1(nearbyint) MEND_F1(fabs)
MEND_F2(atan2) MEND_F2(fmod) MEND_F2(pow)
static inline float mend_fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
static inline double mend_fma(double a, double b, double c) { return __builtin_fma(a, b, c); }
template <typename T> static inline T mend_abs(T a) { return a < 0 ? -a : a; }
static inline float mend_abs(float a) { return __builtin_fabsf(a); }
static inline double mend_abs(double a) { return __builtin_fabs(a); }
static inline int64_t mend_imin(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t mend_imax(int64_t a, int64_t b) { return a > b ? a : b; }

typedef _Float16 mend_half;

static inline float mend_bf16_to_f32(uint16_t v) {
  uint32_t u = ((uint32_t)v) << 16; float f; __builtin_memcpy(&f, &u, 4); return f;
}
static inline uint16_t mend_f32_to_bf16(float f) {
  uint32_t u; __builtin_memcpy(&u, &f, 4);
  uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return (f != f) ? (uint16_t)0x7fc0 : (uint16_t)r;
}
static inline float mend_round_bf16(float f) { return mend_bf16_to_f32(mend_f32_to_bf16(f)); }
static inline float mend_round_half(float f) { return (float)(mend_half)f; }

static inline float mend_from_bits(int32_t i) { float f; __builtin_memcpy(&f, &i, 4); return f; }
static inline int32_t mend_to_bits(float f) { int32_t i; __builtin_memcpy(&i, &f, 4); return i; }

// exp: Cephes-style range reduction + degree-6 polynomial; exact special cases.
static inline float mend_exp(float x) {
  float xc = x < -87.33654f ? -87.33654f : (x > 88.72283f ? 88.72283f : x);
  float n = __builtin_floorf(xc * 1.44269504088896341f + 0.5f);
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500E-4f;
  p = __builtin_fmaf(p, r, 1.3981999507E-3f);
  p = __builtin_fmaf(p, r, 8.3334519073E-3f);
  p = __builtin_fmaf(p, r, 4.1665795894E-2f);
  p = __builtin_fmaf(p, r, 1.6666665459E-1f);
  p = __builtin_fmaf(p, r, 5.0000001201E-1f);
  float y = p * r * r + r + 1.0f;
  int32_t ni = (int32_t)n;
  int32_t n1 = ni / 2;
  float res = y * mend_from_bits((n1 + 127) << 23) * mend_from_bits((ni - n1 + 127) << 23);
  res = x > 88.72283f ? MEND_INF_F : res;
  res = x < -87.33654f ? 0.0f : res;
  return x != x ? x : res;
}
static inline double mend_exp(double x) { return __builtin_exp(x); }

// log: Cephes logf with subnormal scaling; exact special cases.
static inline float mend_log(float x0) {
  bool sub = x0 < 1.17549435e-38f;
  float x = sub ? x0 * 8388608.0f : x0;
  int32_t bits = mend_to_bits(x);
  float e = (float)(((bits >> 23) & 0xff) - 126) - (sub ? 23.0f : 0.0f);
  float m = mend_from_bits((bits & 0x807fffff) | 0x3f000000);  // mantissa in [0.5, 1)
  bool small = m < 0.707106781186547524f;
  e = small ? e - 1.0f : e;
  float t = small ? m + m - 1.0f : m - 1.0f;
  float z = t * t;
  float y = 7.0376836292E-2f;
  y = __builtin_fmaf(y, t, -1.1514610310E-1f);
  y = __builtin_fmaf(y, t, 1.1676998740E-1f);
  y = __builtin_fmaf(y, t, -1.2420140846E-1f);
  y = __builtin_fmaf(y, t, 1.4249322787E-1f);
  y = __builtin_fmaf(y, t, -1.6668057665E-1f);
  y = __builtin_fmaf(y, t, 2.0000714765E-1f);
  y = __builtin_fmaf(y, t, -2.4999993993E-1f);
  y = __builtin_fmaf(y, t, 3.3333331174E-1f);
  y = y * t * z;
  y = y + e * -2.12194440e-4f;
  y = y - 0.5f * z;
  float res = t + y + e * 0.693359375f;
  res = x0 == MEND_INF_F ? x0 : res;
  res = x0 == 0.0f ? -MEND_INF_F : res;
  res = (x0 < 0.0f || x0 != x0) ? MEND_NAN_F : res;
  return res;
}
static inline double mend_log(double x) { return __builtin_log(x); }

static inline float mend_sigmoid(float x) { return 1.0f / (1.0f + mend_exp(-x)); }
static inline double mend_sigmoid(double x) { return 1.0 / (1.0 + __builtin_exp(-x)); }

// tanh: odd polynomial near 0, 1 - 2/(exp(2|x|)+1) elsewhere.
static inline float mend_tanh(float x) {
  float ax = __builtin_fabsf(x);
  float z = x * x;
  float p = -5.70498872745E-3f;
  p = __builtin_fmaf(p, z, 2.06390887954E-2f);
  p = __builtin_fmaf(p, z, -5.37397155531E-2f);
  p = __builtin_fmaf(p, z, 1.33314422036E-1f);
  p = __builtin_fmaf(p, z, -3.33332819422E-1f);
  float small = p * z * x + x;
  float big = 1.0f - 2.0f / (mend_exp(2.0f * ax) + 1.0f);
  big = x < 0.0f ? -big : big;
  float res = ax < 0.625f ? small : big;
  return x != x ? x : res;
}
static inline double mend_tanh(double x) { return __builtin_tanh(x); }

// erf: Abramowitz-Stegun 7.1.26 (|error| <= 1.5e-7), the formula ATen's vectorized CPU erf uses.
static inline float mend_erf(float x) {
  float ax = __builtin_fabsf(x);
  float t = 1.0f / __builtin_fmaf(0.3275911f, ax, 1.0f);
  float r = __builtin_fmaf(1.061405429f, t, -1.453152027f);
  r = __builtin_fmaf(r, t, 1.421413741f);
  r = __builtin_fmaf(r, t, -0.284496736f);
  r = __builtin_fmaf(r, t, 0.254829592f);
  float e = mend_exp(-(x * x));
  float y = __builtin_fmaf(-e * t, r, 1.0f);
  y = x < 0.0f ? -y : y;
  return x != x ? x : y;
}
static inline double mend_erf(double x) { return __builtin_erf(x); }

template <typename T> static inline T mend_max(T a, T b) { return (a > b || a != a) ? a : b; }
template <typename T> static inline T mend_min(T a, T b) { return (a < b || a != a) ? a : b; }
// Integer division never traps: division by zero gives 0 (torch raises instead) and MIN / -1 wraps.
template <typename T> static inline T mend_idiv(T a, T b) { return b == 0 ? (T)0 : (b == (T)-1 ? (T)(0 - a) : (T)(a / b)); }
template <typename T> static inline T mend_imod(T a, T b) { return (b == 0 || b == (T)-1) ? (T)0 : (T)(a % b); }
template <typename T> static inline T mend_floordiv_int(T a, T b) {
  T q = mend_idiv(a, b); return ((mend_imod(a, b) != 0) && ((a < 0) != (b < 0))) ? q - 1 : q;
}
template <typename T> static inline T mend_remainder_int(T a, T b) {
  T r = mend_imod(a, b); return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
template <typename T> static inline T mend_remainder_fp(T a, T b) {
  T r = mend_fmod(a, b); return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
template <typename T> static inline T mend_ipow(T a, T b) {
  if (b < 0) return (a == 1) ? 1 : ((a == -1) ? ((b & 1) ? -1 : 1) : 0);
  T r = 1; while (b) { if (b & 1) r *= a; a *= a; b >>= 1; } return r;
}
template <typename T> static inline T mend_sign(T a) { return a != a ? a : (T)((a > 0) - (a < 0)); }
