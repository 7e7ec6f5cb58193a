// Writing a resource variable's buffer in place, shared by the kernels that do
// (the fused optimizer updates, the in-place owners' broadcast).
#pragma once

#include <cstring>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_var.h"
#include "tensorflow/core/framework/tensor.h"

namespace tfmpi::tf {

// Makes `var`'s buffer this op's alone before it is written in place, as
// TensorFlow's own update kernels do: a tensor still read elsewhere, or a
// variable in copy-on-read mode, gets a new buffer first (so a value read
// before keeps its contents), with the old contents copied unless
// `keep_contents` is false (the op overwrites them all). Requires var's lock.
inline absl::Status MakeExclusive(::tensorflow::OpKernelContext* ctx, ::tensorflow::Var* var,
                                  bool keep_contents = true) {
  ::tensorflow::Tensor* t = var->tensor();
  if (!var->copy_on_read_mode.load() && t->RefCountIsOne()) return absl::OkStatus();
  ::tensorflow::Tensor copy;
  ::tensorflow::AllocatorAttributes attr;  // CPU only: no GPU or NIC attributes needed
  TF_RETURN_IF_ERROR(ctx->allocate_temp(t->dtype(), t->shape(), &copy, attr));
  if (keep_contents && t->TotalBytes() > 0)
    std::memcpy(const_cast<char*>(copy.tensor_data().data()), t->tensor_data().data(),
                t->TotalBytes());
  *t = copy;
  return absl::OkStatus();
}

}  // namespace tfmpi::tf
