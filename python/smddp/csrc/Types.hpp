// Types.hpp - torch dtypes and reduce ops in libsmddp's terms, and the errors
// the backend raises.
//
// Everything here decides, before any work is queued, whether a call can be
// done exactly; what cannot is refused with a c10 error that says what and
// why, never approximated.
#pragma once

#include <exception>
#include <optional>
#include <string>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <smddp/smddp.h>

namespace smddp_torch {

// The element type a tensor is moved as.  Complex tensors travel as twice as
// many reals (view_as_real); bool as uint8 (one byte, 0 or 1, in torch).
struct Dtype {
  smddp_dtype dtype;
  int lanes; // library elements per torch element: 2 for complex, else 1
  bool isBool;
  bool isComplex;
  bool isFloat; // floating point or complex: what PREMUL_SUM may scale
};

// The reduction a call does.  PREMUL_SUM is a SUM of inputs first multiplied
// by factor (a double, or a one-element tensor when factorTensor is set).
struct Reduction {
  smddp_op op;
  bool premul = false;
  double factor = 1.0;
  std::optional<at::Tensor> factorTensor;
};

// Throws c10::NotImplementedError when the dtype has no libsmddp type.
Dtype toSmddpDtype(at::ScalarType type, const char* opName);

// How the elements of a tensor travel in the calls that only move data
// (send and recv, broadcast, the all-gathers, gather, scatter, all-to-all,
// sparse all-reduce): as their libsmddp dtype where they have one (so that
// a count mismatch is reported in elements), else as bytes, so that every
// dtype moves (int16, uint16, float8...).  units: library elements per
// torch element.
struct Moved {
  smddp_dtype dtype;
  size_t units;
};
Moved movedAs(at::ScalarType type);

// Throws when the op has no exact libsmddp equivalent for this dtype: bool
// maps SUM to MAX and PRODUCT to MIN (as gloo and NCCL do), complex allows
// only SUM, AVG and PREMUL_SUM, bitwise ops are not supported.
Reduction toSmddpReduction(const c10d::ReduceOp& op, const Dtype& dtype, const char* opName);

// "torch.int16" ...: the name Python users know.
std::string dtypeName(at::ScalarType type);

// "SUM", "PREMUL_SUM" ...
std::string reduceOpName(const c10d::ReduceOp& op);

// Raises c10::NotImplementedError: "smddp: <what> is not supported by the
// smddp backend. <hint>", the hint saying what to do instead (by default,
// kOtherBackend).
[[noreturn]] void throwNotSupported(const std::string& what, const std::string& hint = "");

// What to do about a call this backend cannot do: a sentence, and the same
// to end one.
constexpr const char* kOtherBackend =
    "Run this call on a gloo or nccl process group instead "
    "(e.g. dist.new_group(backend=\"gloo\")).";
constexpr const char* kOtherBackendLower =
    "run this call on a gloo or nccl process group instead "
    "(e.g. dist.new_group(backend=\"gloo\")).";

// Raises c10::DistBackendError with msg (which starts with "smddp: ").
[[noreturn]] void throwBackendError(const std::string& msg);

// The same error, to complete a work with instead of raising it.
std::exception_ptr backendError(const std::string& msg);

// The message of an exception, without the C++ backtrace of c10 errors.
std::string messageOf(const std::exception_ptr& error);

} // namespace smddp_torch
