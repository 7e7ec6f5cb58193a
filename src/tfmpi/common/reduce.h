// Element-wise reduction kernels shared by the in-process transport and the
// MPI user-defined operators for 16-bit floats.
#pragma once

#include <cstddef>

#include "tfmpi/common/types.h"

namespace tfmpi {

// inout[i] = inout[i] (op) in[i] for i < count. `op` must not be kAverage
// (average is a sum followed by ScaleBuffer).
void ReduceInto(void* inout, const void* in, std::size_t count, DataType dtype, ReduceOp op);

// buf[i] *= factor, for floating-point dtypes (16-bit types via float32).
void ScaleBuffer(void* buf, std::size_t count, DataType dtype, double factor);

// dst[i] = src[i] * factor; the copy-out half of a fused average.
void ScaleCopy(void* dst, const void* src, std::size_t count, DataType dtype, double factor);

}  // namespace tfmpi
