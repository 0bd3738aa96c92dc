// Types.cpp - torch dtypes and reduce ops in libsmddp's terms, and the errors
// the backend raises.
#include "Types.hpp"

#include <cctype>

#include <c10/util/Exception.h>

namespace smddp_torch {

void throwNotSupported(const std::string& what, const std::string& hint) {
  std::string msg = "smddp: " + what + " is not supported by the smddp backend. " +
      (hint.empty() ? std::string(kOtherBackend) : hint);
  C10_THROW_ERROR(NotImplementedError, msg);
}

void throwBackendError(const std::string& msg) {
  C10_THROW_ERROR(DistBackendError, msg);
}

std::exception_ptr backendError(const std::string& msg) {
  try {
    throwBackendError(msg);
  } catch (...) {
    return std::current_exception();
  }
}

std::string messageOf(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown exception";
  }
}

std::string dtypeName(at::ScalarType type) {
  switch (type) {
    case at::kByte:
      return "torch.uint8";
    case at::kChar:
      return "torch.int8";
    case at::kShort:
      return "torch.int16";
    case at::kInt:
      return "torch.int32";
    case at::kLong:
      return "torch.int64";
    case at::kHalf:
      return "torch.float16";
    case at::kFloat:
      return "torch.float32";
    case at::kDouble:
      return "torch.float64";
    case at::kComplexHalf:
      return "torch.complex32";
    case at::kComplexFloat:
      return "torch.complex64";
    case at::kComplexDouble:
      return "torch.complex128";
    default: {
      // Bool, BFloat16, UInt16, Float8_e4m3fn...: torch's name in lower case.
      std::string name = c10::toString(type);
      for (auto& c : name)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return "torch." + name;
    }
  }
}

// The libsmddp type of a torch dtype, if it has one.
static std::optional<Dtype> lookupDtype(at::ScalarType type) {
  switch (type) {
    case at::kChar:
      return Dtype{SMDDP_INT8, 1, false, false, false};
    case at::kByte:
      return Dtype{SMDDP_UINT8, 1, false, false, false};
    case at::kBool:
      return Dtype{SMDDP_UINT8, 1, true, false, false};
    case at::kInt:
      return Dtype{SMDDP_INT32, 1, false, false, false};
    case at::kLong:
      return Dtype{SMDDP_INT64, 1, false, false, false};
    case at::ScalarType::UInt32:
      return Dtype{SMDDP_UINT32, 1, false, false, false};
    case at::ScalarType::UInt64:
      return Dtype{SMDDP_UINT64, 1, false, false, false};
    case at::kHalf:
      return Dtype{SMDDP_FLOAT16, 1, false, false, true};
    case at::kBFloat16:
      return Dtype{SMDDP_BFLOAT16, 1, false, false, true};
    case at::kFloat:
      return Dtype{SMDDP_FLOAT32, 1, false, false, true};
    case at::kDouble:
      return Dtype{SMDDP_FLOAT64, 1, false, false, true};
    case at::kComplexFloat:
      return Dtype{SMDDP_FLOAT32, 2, false, true, true};
    case at::kComplexDouble:
      return Dtype{SMDDP_FLOAT64, 2, false, true, true};
    default:
      return std::nullopt;
  }
}

Dtype toSmddpDtype(at::ScalarType type, const char* opName) {
  if (auto dt = lookupDtype(type))
    return *dt;
  throwNotSupported(
      std::string(opName) + " on " + dtypeName(type) + " tensors",
      "Cast the tensor to a dtype it reduces (int8, uint8, int32, int64, uint32, uint64, "
      "float16, bfloat16, float32, float64, bool, complex64 or complex128; int16 and "
      "uint16 to int32, float8 to float16 or bfloat16), or " +
          std::string(kOtherBackendLower));
}

Moved movedAs(at::ScalarType type) {
  if (auto dt = lookupDtype(type))
    return {dt->dtype, static_cast<size_t>(dt->lanes)};
  return {SMDDP_UINT8, c10::elementSize(type)};
}

std::string reduceOpName(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return "SUM";
    case c10d::ReduceOp::AVG:
      return "AVG";
    case c10d::ReduceOp::PRODUCT:
      return "PRODUCT";
    case c10d::ReduceOp::MIN:
      return "MIN";
    case c10d::ReduceOp::MAX:
      return "MAX";
    case c10d::ReduceOp::BAND:
      return "BAND";
    case c10d::ReduceOp::BOR:
      return "BOR";
    case c10d::ReduceOp::BXOR:
      return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM:
      return "PREMUL_SUM";
    default:
      return "op " + std::to_string(static_cast<int>(op.op_));
  }
}

static Reduction premulSum(const c10d::ReduceOp& op, const char* opName) {
  auto* supp = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
  TORCH_CHECK_VALUE(
      supp != nullptr,
      "smddp: ",
      opName,
      " got ReduceOp.PREMUL_SUM without its factor; build it with "
      "torch.distributed._make_nccl_premul_sum(factor)");
  Reduction r{SMDDP_SUM};
  r.premul = true;
  if (supp->tensor_factor.defined())
    r.factorTensor = supp->tensor_factor;
  else
    r.factor = supp->double_factor;
  return r;
}

Reduction toSmddpReduction(const c10d::ReduceOp& op, const Dtype& dtype, const char* opName) {
  const std::string where = std::string(opName) + " with ReduceOp." + reduceOpName(op);

  if (dtype.isBool) {
    // Same as gloo (bool + bool saturates) and NCCL (which maps the ops
    // explicitly): SUM is a logical or, PRODUCT a logical and.
    switch (op.op_) {
      case c10d::ReduceOp::SUM:
      case c10d::ReduceOp::MAX:
      case c10d::ReduceOp::BOR:
        return {SMDDP_MAX};
      case c10d::ReduceOp::PRODUCT:
      case c10d::ReduceOp::MIN:
      case c10d::ReduceOp::BAND:
        return {SMDDP_MIN};
      case c10d::ReduceOp::AVG:
      case c10d::ReduceOp::PREMUL_SUM:
        TORCH_CHECK_VALUE(false, "smddp: ", where, " is not defined on bool tensors");
      default:
        throwNotSupported(where + " on bool tensors");
    }
  }

  if (dtype.isComplex) {
    // Element-wise on the real and imaginary parts is right only for these.
    switch (op.op_) {
      case c10d::ReduceOp::SUM:
        return {SMDDP_SUM};
      case c10d::ReduceOp::AVG:
        return {SMDDP_AVG};
      case c10d::ReduceOp::PREMUL_SUM:
        return premulSum(op, opName);
      default:
        TORCH_CHECK_VALUE(
            false,
            "smddp: ",
            where,
            " is not defined on complex tensors (only SUM, AVG and PREMUL_SUM are)");
    }
  }

  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return {SMDDP_SUM};
    case c10d::ReduceOp::AVG:
      return {SMDDP_AVG};
    case c10d::ReduceOp::PRODUCT:
      return {SMDDP_PROD};
    case c10d::ReduceOp::MIN:
      return {SMDDP_MIN};
    case c10d::ReduceOp::MAX:
      return {SMDDP_MAX};
    case c10d::ReduceOp::PREMUL_SUM:
      if (!dtype.isFloat)
        throwNotSupported(
            where + " on integer tensors",
            "Use SUM and scale the result, or cast the tensor to a floating point dtype.");
      return premulSum(op, opName);
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
    case c10d::ReduceOp::BXOR:
      throwNotSupported(
          where, "libsmddp has no bitwise reductions: " + std::string(kOtherBackendLower));
    default:
      throwNotSupported(where);
  }
}

} // namespace smddp_torch
