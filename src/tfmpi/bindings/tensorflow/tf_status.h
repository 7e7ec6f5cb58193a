// The one conversion between tfmpi::Status and TensorFlow's status, at the op
// boundary, plus dtype mapping.
#pragma once

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/types.h"
#include "tfmpi/common/status.h"
#include "tfmpi/common/types.h"

namespace tfmpi::tf {

inline absl::Status ToTfStatus(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk: return absl::OkStatus();
    case StatusCode::kInvalidArgument: return absl::InvalidArgumentError(s.message());
    case StatusCode::kFailedPrecondition: return absl::FailedPreconditionError(s.message());
    case StatusCode::kMismatch: return absl::InvalidArgumentError("tfmpi: " + s.message());
    case StatusCode::kAborted: return absl::AbortedError(s.message());
    case StatusCode::kInternal: return absl::InternalError(s.message());
    case StatusCode::kNotFound: return absl::NotFoundError(s.message());
    case StatusCode::kDataLoss: return absl::DataLossError(s.message());
  }
  return absl::UnknownError(s.message());
}

inline bool ToTfmpiDtype(tensorflow::DataType t, DataType* out) {
  switch (t) {
    case tensorflow::DT_HALF: *out = DataType::kFloat16; return true;
    case tensorflow::DT_BFLOAT16: *out = DataType::kBFloat16; return true;
    case tensorflow::DT_FLOAT: *out = DataType::kFloat32; return true;
    case tensorflow::DT_DOUBLE: *out = DataType::kFloat64; return true;
    case tensorflow::DT_INT32: *out = DataType::kInt32; return true;
    case tensorflow::DT_INT64: *out = DataType::kInt64; return true;
    case tensorflow::DT_UINT8: *out = DataType::kUInt8; return true;
    case tensorflow::DT_BOOL: *out = DataType::kBool; return true;
    default: return false;
  }
}

}  // namespace tfmpi::tf
