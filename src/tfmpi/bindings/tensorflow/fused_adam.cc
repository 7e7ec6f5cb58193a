// TfmpiApplyAdam: Keras 3's Adam update of one variable in one pass over memory.
//
// Note [Fused Adam]
// Keras 3's Adam.update_step (TensorFlow backend, no XLA on CPUs) runs about a
// dozen element-wise TensorFlow ops per variable, each a pass over the whole
// variable: on the 42 M-parameter MLP of docs/peers.md one update took 230 ms
// on one thread, 83 ms with this kernel.
// This kernel computes the same float operations, in the same order, element by
// element, in one pass (read var, m, v and the gradient, write var, m and v):
//
//   m   = m + (g - m) * one_minus_beta_1
//   v   = v + (g * g - v) * one_minus_beta_2
//   var = var - (m * alpha) / (sqrt(v) + epsilon)
//
// Every operation is one IEEE operation rounded to T, as in the separate ops
// (no contraction into fused multiply-adds: the file is built with
// -ffp-contract=off; std::sqrt is correctly rounded), and the kernel runs on
// TensorFlow's threads, which flush denormals as its element-wise kernels do.
// So the result is bit for bit Keras' result, as long as TensorFlow's own
// square root is correctly rounded too: it is in the x86 wheels (AVX's
// _mm256_sqrt_ps); Eigen's AVX-512 square root under EIGEN_FAST_MATH, in a
// TensorFlow built for AVX-512, is an estimate refined by a Newton step, and
// there the check below fails and Keras' ops run. The scalars (alpha from the step
// count, the constants as Keras rounds them) are computed by Keras' own ops in
// Python (python/tfmpi/transparent/fused_adam.py), which also checks at first
// use that this kernel and the stock update agree bit for bit on this machine
// and keeps the stock update when they do not.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/framework/resource_var.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/platform/threadpool.h"

namespace tfmpi::tf {
namespace {

using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
using ::tensorflow::Var;

REGISTER_OP("TfmpiApplyAdam")
    .Input("var: resource")
    .Input("m: resource")
    .Input("v: resource")
    .Input("grad: T")
    .Input("one_minus_beta_1: T")
    .Input("one_minus_beta_2: T")
    .Input("alpha: T")
    .Input("epsilon: T")
    .Attr("T: {float, double}")
    .SetIsStateful()
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext*) {
      return absl::OkStatus();
    })
    .Doc("Keras 3's Adam update of var with its slots m and v, in one pass (Note [Fused Adam]).");

// Makes `var`'s buffer this op's alone before it is written in place, as
// TensorFlow's own update kernels do: a tensor still read elsewhere, or a
// variable in copy-on-read mode, is copied first. Requires var's lock.
absl::Status MakeExclusive(OpKernelContext* ctx, Var* var) {
  Tensor* t = var->tensor();
  if (!var->copy_on_read_mode.load() && t->RefCountIsOne()) return absl::OkStatus();
  Tensor copy;
  ::tensorflow::AllocatorAttributes attr;  // CPU only: no GPU or NIC attributes needed
  TF_RETURN_IF_ERROR(ctx->allocate_temp(t->dtype(), t->shape(), &copy, attr));
  std::memcpy(const_cast<char*>(copy.tensor_data().data()), t->tensor_data().data(),
              t->TotalBytes());
  *t = copy;
  return absl::OkStatus();
}

template <typename T>
void AdamRange(T* var, T* m, T* v, const T* g, T c1, T c2, T alpha, T eps, int64_t begin,
               int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    const T gi = g[i];
    const T mi = m[i] + (gi - m[i]) * c1;
    const T vi = v[i] + (gi * gi - v[i]) * c2;
    m[i] = mi;
    v[i] = vi;
    var[i] = var[i] - (mi * alpha) / (std::sqrt(vi) + eps);
  }
}

template <typename T>
class ApplyAdamOp : public OpKernel {
 public:
  explicit ApplyAdamOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    static const char* const kNames[3] = {"var", "m", "v"};
    ::tensorflow::core::RefCountPtr<Var> vars[3];
    for (int i = 0; i < 3; ++i) {
      OP_REQUIRES_OK(ctx, ::tensorflow::LookupResource(
                              ctx, ::tensorflow::HandleFromInput(ctx, i), &vars[i]));
    }
    OP_REQUIRES(ctx, vars[0].get() != vars[1].get() && vars[0].get() != vars[2].get() &&
                         vars[1].get() != vars[2].get(),
                absl::InvalidArgumentError("TfmpiApplyAdam: var, m and v must be distinct"));
    // Lock in address order, as TensorFlow's update kernels do, so that two
    // updates sharing a variable cannot deadlock.
    std::vector<::tensorflow::mutex*> mus = {vars[0]->mu(), vars[1]->mu(), vars[2]->mu()};
    std::sort(mus.begin(), mus.end());
    ::tensorflow::mutex_lock l0(*mus[0]), l1(*mus[1]), l2(*mus[2]);

    const Tensor& grad = ctx->input(3);
    for (int i = 0; i < 3; ++i) {
      const Tensor& t = *vars[i]->tensor();
      OP_REQUIRES(ctx, vars[i]->is_initialized && t.IsInitialized(),
                  absl::FailedPreconditionError(
                      absl::StrCat("TfmpiApplyAdam: ", kNames[i], " is not initialized")));
      OP_REQUIRES(ctx, t.dtype() == grad.dtype() && t.shape() == grad.shape(),
                  absl::InvalidArgumentError(absl::StrCat(
                      "TfmpiApplyAdam: ", kNames[i], " is ", t.DebugString(),
                      " but the gradient is ", grad.DebugString())));
    }
    T scalars[4];
    for (int i = 0; i < 4; ++i) {
      const Tensor& s = ctx->input(4 + i);
      OP_REQUIRES(ctx, ::tensorflow::TensorShapeUtils::IsScalar(s.shape()),
                  absl::InvalidArgumentError(absl::StrCat(
                      "TfmpiApplyAdam: input ", 4 + i, " must be a scalar, got ",
                      s.shape().DebugString())));
      scalars[i] = s.scalar<T>()();
    }
    for (auto& var : vars) OP_REQUIRES_OK(ctx, MakeExclusive(ctx, var.get()));

    T* w = vars[0]->tensor()->flat<T>().data();
    T* m = vars[1]->tensor()->flat<T>().data();
    T* v = vars[2]->tensor()->flat<T>().data();
    const T* g = grad.flat<T>().data();
    const int64_t n = grad.NumElements();
    const T c1 = scalars[0], c2 = scalars[1], alpha = scalars[2], eps = scalars[3];
    auto range = [=](int64_t begin, int64_t end) {
      AdamRange<T>(w, m, v, g, c1, c2, alpha, eps, begin, end);
    };
    // Seven values of T move per element; the division and square root add
    // about as much again.
    const int64_t cost_per_element = 7 * static_cast<int64_t>(sizeof(T)) + 20;
    auto* workers = ctx->device()->tensorflow_cpu_worker_threads()->workers;
    workers->ParallelFor(n, cost_per_element, range);
  }
};

REGISTER_KERNEL_BUILDER(
    Name("TfmpiApplyAdam").Device(::tensorflow::DEVICE_CPU).TypeConstraint<float>("T"),
    ApplyAdamOp<float>);
REGISTER_KERNEL_BUILDER(
    Name("TfmpiApplyAdam").Device(::tensorflow::DEVICE_CPU).TypeConstraint<double>("T"),
    ApplyAdamOp<double>);

}  // namespace
}  // namespace tfmpi::tf
