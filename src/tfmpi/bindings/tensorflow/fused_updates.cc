// Keras 3 optimizer updates in one pass over memory: TfmpiApplyAdam (Adam,
// AdamW) and TfmpiApplyMomentum (SGD with momentum, Nesterov or not).
//
// Note [Fused updates]
// On CPUs Keras 3 runs an optimizer's update_step as separate TensorFlow ops
// (Keras turns XLA off on machines without accelerators), each a pass over
// the whole variable: Adam's is about a dozen. On the 42 M-parameter MLP of
// docs/peers.md one Adam update took 230 ms on one thread, 83 ms with the
// kernel here. Each kernel computes the same float operations, in the same
// order, element by element, in one pass (reading the variable, its slots and
// the gradient once, writing the variable and slots once):
//
//   Adam:      m   = m + (g - m) * one_minus_beta_1
//              v   = v + (g * g - v) * one_minus_beta_2
//              var = var - (m * alpha) / (sqrt(v) + epsilon)
//   Momentum:  m   = m * momentum - g * lr
//              var = var + m                          (Nesterov:
//              var = var + (m * momentum - g * lr))
//
// Every operation is one IEEE operation rounded to T, as in the separate ops
// (no contraction into fused multiply-adds: the file is built with
// -ffp-contract=off; std::sqrt is correctly rounded), and the kernels run on
// TensorFlow's threads, which flush denormals as its element-wise kernels do.
// So the result is bit for bit Keras' result, as long as TensorFlow's own
// square root is correctly rounded too: it is in the x86 wheels (AVX's
// _mm256_sqrt_ps); Eigen's AVX-512 square root under EIGEN_FAST_MATH, in a
// TensorFlow built for AVX-512, is an estimate refined by a Newton step, and
// there the check below fails and Keras' ops run. The scalars (alpha from the
// step count, the constants as Keras rounds them) are computed by Keras' own
// ops in Python (python/tfmpi/transparent/fused_updates.py), which also checks
// at first use that each kernel and the stock update agree bit for bit on this
// machine and keeps the stock update when they do not.
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/framework/resource_var.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/platform/threadpool.h"
#include "tfmpi/bindings/tensorflow/variables.h"

namespace tfmpi::tf {
namespace {

using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
using ::tensorflow::Var;

absl::Status NoOutputs(::tensorflow::shape_inference::InferenceContext*) {
  return absl::OkStatus();
}

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
    .SetShapeFn(NoOutputs)
    .Doc("Keras 3's Adam update of var with its slots m and v, in one pass (Note [Fused updates]).");

REGISTER_OP("TfmpiApplyMomentum")
    .Input("var: resource")
    .Input("m: resource")
    .Input("grad: T")
    .Input("momentum: T")
    .Input("lr: T")
    .Attr("T: {float, double}")
    .Attr("nesterov: bool")
    .SetIsStateful()
    .SetShapeFn(NoOutputs)
    .Doc("Keras 3's SGD update with momentum of var and its slot m, in one pass (Note [Fused updates]).");

// Runs `update` over the variables of resource inputs 0..names.size()-1 (the
// variable, then its slots), each of the gradient's (input `grad`) dtype and
// shape and distinct, under their locks taken in address order (as
// TensorFlow's update kernels do, so that two updates sharing a variable
// cannot deadlock), after every scalar input from `first_scalar` on was
// checked and read into `scalars`. `update` gets the variables' data and the
// element range; it runs split over the intra-op threads. A failed check
// returns its error before any variable is written.
template <typename T>
absl::Status UpdateInPlace(OpKernelContext* ctx, const char* op,
                           const std::vector<const char*>& names, int grad, int first_scalar,
                           std::vector<T>* scalars,
                           const std::function<void(T* const*, const T*, int64_t, int64_t)>& update,
                           int64_t cost_per_element) {
  const int n = static_cast<int>(names.size());
  std::vector<::tensorflow::core::RefCountPtr<Var>> vars(n);
  for (int i = 0; i < n; ++i) {
    TF_RETURN_IF_ERROR(
        ::tensorflow::LookupResource(ctx, ::tensorflow::HandleFromInput(ctx, i), &vars[i]));
  }
  std::vector<::tensorflow::mutex*> mus;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < i; ++j) {
      if (vars[i].get() == vars[j].get()) {
        return absl::InvalidArgumentError(
            absl::StrCat(op, ": ", names[j], " and ", names[i], " must be distinct variables"));
      }
    }
    mus.push_back(vars[i]->mu());
  }
  std::sort(mus.begin(), mus.end());
  std::vector<std::unique_ptr<::tensorflow::mutex_lock>> locks;
  for (auto* mu : mus) locks.push_back(std::make_unique<::tensorflow::mutex_lock>(*mu));

  const Tensor& g = ctx->input(grad);
  for (int i = 0; i < n; ++i) {
    const Tensor& t = *vars[i]->tensor();
    if (!vars[i]->is_initialized || !t.IsInitialized()) {
      return absl::FailedPreconditionError(absl::StrCat(op, ": ", names[i], " is not initialized"));
    }
    if (t.dtype() != g.dtype() || t.shape() != g.shape()) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": ", names[i], " is ", t.DebugString(),
                                                     " but the gradient is ", g.DebugString()));
    }
  }
  scalars->clear();
  for (int i = first_scalar; i < ctx->num_inputs(); ++i) {
    const Tensor& s = ctx->input(i);
    if (!::tensorflow::TensorShapeUtils::IsScalar(s.shape())) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": input ", i, " must be a scalar, got ", s.shape().DebugString()));
    }
    scalars->push_back(s.scalar<T>()());
  }
  for (auto& var : vars) TF_RETURN_IF_ERROR(MakeExclusive(ctx, var.get()));

  std::vector<T*> data;
  for (auto& var : vars) data.push_back(var->tensor()->flat<T>().data());
  const T* gd = g.flat<T>().data();
  T* const* d = data.data();
  auto* workers = ctx->device()->tensorflow_cpu_worker_threads()->workers;
  workers->ParallelFor(g.NumElements(), cost_per_element,
                       [&](int64_t begin, int64_t end) { update(d, gd, begin, end); });
  return absl::OkStatus();
}

template <typename T>
class ApplyAdamOp : public OpKernel {
 public:
  explicit ApplyAdamOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    std::vector<T> s;
    auto update = [&s](T* const* d, const T* g, int64_t begin, int64_t end) {
      T* var = d[0];
      T* m = d[1];
      T* v = d[2];
      const T c1 = s[0], c2 = s[1], alpha = s[2], eps = s[3];
      for (int64_t i = begin; i < end; ++i) {
        const T gi = g[i];
        const T mi = m[i] + (gi - m[i]) * c1;
        const T vi = v[i] + (gi * gi - v[i]) * c2;
        m[i] = mi;
        v[i] = vi;
        var[i] = var[i] - (mi * alpha) / (std::sqrt(vi) + eps);
      }
    };
    // Seven values of T move per element; the division and square root add
    // about as much again.
    OP_REQUIRES_OK(ctx, UpdateInPlace<T>(ctx, "TfmpiApplyAdam", {"var", "m", "v"}, 3, 4, &s,
                                         update, 7 * static_cast<int64_t>(sizeof(T)) + 20));
  }
};

template <typename T>
class ApplyMomentumOp : public OpKernel {
 public:
  explicit ApplyMomentumOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("nesterov", &nesterov_));
  }

  void Compute(OpKernelContext* ctx) override {
    std::vector<T> s;
    const bool nesterov = nesterov_;
    auto update = [&s, nesterov](T* const* d, const T* g, int64_t begin, int64_t end) {
      T* var = d[0];
      T* m = d[1];
      const T momentum = s[0], lr = s[1];
      for (int64_t i = begin; i < end; ++i) {
        const T step = g[i] * lr;
        const T mi = m[i] * momentum - step;
        m[i] = mi;
        var[i] = nesterov ? var[i] + (mi * momentum - step) : var[i] + mi;
      }
    };
    OP_REQUIRES_OK(ctx, UpdateInPlace<T>(ctx, "TfmpiApplyMomentum", {"var", "m"}, 2, 3, &s,
                                         update, 5 * static_cast<int64_t>(sizeof(T)) + 4));
  }

 private:
  bool nesterov_ = false;
};

#define TFMPI_REGISTER_UPDATES(T)                                                          \
  REGISTER_KERNEL_BUILDER(                                                                 \
      Name("TfmpiApplyAdam").Device(::tensorflow::DEVICE_CPU).TypeConstraint<T>("T"),      \
      ApplyAdamOp<T>);                                                                     \
  REGISTER_KERNEL_BUILDER(                                                                 \
      Name("TfmpiApplyMomentum").Device(::tensorflow::DEVICE_CPU).TypeConstraint<T>("T"),  \
      ApplyMomentumOp<T>);
TFMPI_REGISTER_UPDATES(float)
TFMPI_REGISTER_UPDATES(double)
#undef TFMPI_REGISTER_UPDATES

}  // namespace
}  // namespace tfmpi::tf
