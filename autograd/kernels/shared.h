// What the C++ kernels and the OpenCL C kernels (autograd/opencl/kernels/)
// must agree on, defined once: the op codes the elementwise entries switch on,
// the score of a hidden attention position, dropout's hash, and a Rows view as
// the OpenCL kernels take it. The text is the common subset of C++ and OpenCL
// C: kernels.h includes it, and the build embeds it in front of the OpenCL
// programs (autograd/opencl/sources.cpp), so an OpenCL kernel's `case Relu:`
// is C++'s Unary::Relu by construction.
//
// An include guard, not #pragma once: OpenCL compiles this text as the start
// of a program, where #pragma once draws a warning.
#ifndef SF_KERNELS_SHARED_H
#define SF_KERNELS_SHARED_H

#ifdef __OPENCL_VERSION__
// OpenCL C has no scoped enums, constexpr or <cstdint>: its kernels name the
// enumerators unqualified (`case Relu:`), and its constants live in __constant.
#define SF_ENUM(name) enum name
#define SF_CONSTANT __constant
#define SF_FUNCTION
#define SF_EXP exp
typedef int int32_t;
typedef uint uint32_t;
// OpenCL hashes the 16 lanes of a vector at once.
typedef uint16 DropoutBits;
#else
#include <cmath>
#include <cstdint>
namespace sf::kernels {
#define SF_ENUM(name) enum class name
#define SF_CONSTANT constexpr
#define SF_FUNCTION inline
#define SF_EXP std::exp
typedef uint32_t DropoutBits;
#endif

// The op codes of the elementwise entries, each list written once: the enums
// below are expanded from them, and so are the lists of codes the tests run
// on every backend (kernels.h: kBinaryCodes, kPredicateCodes, kUnaryCodes).
// Every backend's switch has a case per code: the C++ ones have no default,
// so the compiler (-Wswitch) names a code one of them misses; the OpenCL
// ones' default writes a poison (NaN, or 2 for a predicate) that the tests
// see on the first code without a case.
#define SF_BINARY_CODES(X) X(Add) X(Sub) X(Mul) X(Div)
// Predicates write int32 1 / 0; And and Or treat nonzero as true.
#define SF_PREDICATE_CODES(X) X(Eq) X(Ne) X(Lt) X(Le) X(Gt) X(Ge) X(And) X(Or)
#define SF_UNARY_CODES(X)                                                                                    \
  X(Neg) X(Exp) X(Log) X(Sqrt) X(Relu) X(Tanh) X(Sigmoid) X(AddScalar) X(MulScalar) X(PowScalar) X(RSubScalar) \
  X(RDivScalar) X(RoundBf16)
// Unary codes whose formula is a function of one float written below, once
// for every backend: each backend's switch expands this list into a case that
// calls the function (the scalar and fast tables element by element, OpenCL
// lane by lane), so such a code is this line and its function, nothing else.
// X(code, function).
#define SF_FORMULA_CODES(X) X(Gelu, gelu_tanh) X(GeluGrad, gelu_tanh_grad)
#define SF_ENUMERATOR(code) code,
#define SF_FORMULA_ENUMERATOR(code, function) code,
SF_ENUM(Binary) { SF_BINARY_CODES(SF_ENUMERATOR) };
SF_ENUM(Predicate) { SF_PREDICATE_CODES(SF_ENUMERATOR) };
SF_ENUM(Unary) { SF_UNARY_CODES(SF_ENUMERATOR) SF_FORMULA_CODES(SF_FORMULA_ENUMERATOR) };

// GELU (Hendrycks & Gimpel 2016) in its tanh form, PyTorch's
// gelu(x, approximate='tanh'): 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3),
// the form GPT-2 and BERT trained with, chosen over the exact erf form for
// that reason. Computed as x sigmoid(2u), the same value, because OpenCL's
// tanh may miss +-1 by an ulp where it saturates, which 0.5 x (1 + tanh(u))
// multiplies by x (-1e30 would give -3e22, not -0); e^-2u overflows to inf
// or underflows to 0 exactly. As PyTorch's formula gives, -inf is NaN.
SF_FUNCTION float gelu_tanh(float x) {
  float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  return x / (1.0f + SF_EXP(-2.0f * u));
}
// d gelu_tanh / dx = s + x 2 s (1 - s) du/dx, s = sigmoid(2u),
// du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
SF_FUNCTION float gelu_tanh_grad(float x) {
  float s = 1.0f / (1.0f + SF_EXP(-1.5957691216057308f * (x + 0.044715f * x * x * x)));
  return s + x * (2.0f * s * (1.0f - s)) * 0.7978845608028654f * (1.0f + 0.134145f * x * x);
}

// The score a hidden position gets before masked_softmax's softmax, as the
// annotated Transformer's scores.masked_fill(mask == 0, -1e9): its weight
// underflows to 0, yet a row with every position hidden stays uniform (not NaN).
SF_CONSTANT float kHiddenScore = -1e9f;

// Dropout keeps element i where dropout_hash(seed, i) >= threshold, so
// P(keep) = 1 - threshold / 2^32. A stateless hash of (seed, i) (the
// "lowbias32" integer hash of i * 0x9E3779B1 + seed): the mask does not depend
// on how threads or work items split the work, the backward pass recomputes it
// instead of storing it, and a seed gives the same mask on every device.
SF_FUNCTION DropoutBits dropout_hash(uint32_t seed, DropoutBits i) {
  DropoutBits h = i * 0x9E3779B1u + seed;
  h ^= h >> 16;
  h *= 0x7feb352du;
  h ^= h >> 15;
  h *= 0x846ca68bu;
  h ^= h >> 16;
  return h;
}

// A Rows view (kernels.h) packed for the OpenCL kernels: int32 throughout, so
// it passes by value as one kernel argument, without padding
// (autograd/opencl/launch.h: add_arg). Row r of operand k starts at
// row_offset(rows, k, r) (autograd/opencl/kernels/common.cl).
typedef struct {
  int32_t count, cols, ndim;
  int32_t shape[8], strides[2][8], col_strides[2];  // 8: Rows::kMaxDims
} PackedRows;

#ifndef __OPENCL_VERSION__
}  // namespace sf::kernels
#endif
#undef SF_ENUM
#undef SF_CONSTANT
#undef SF_FUNCTION
#undef SF_EXP

#endif  // SF_KERNELS_SHARED_H
