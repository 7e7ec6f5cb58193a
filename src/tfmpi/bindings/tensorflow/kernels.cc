// Asynchronous TensorFlow kernels: each hands its tensors to the process-wide
// engine and completes from the engine's callback (on the engine's thread).
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/framework/resource_var.h"
#include "tensorflow/core/framework/tensor.h"
#include "tfmpi/bindings/tensorflow/tf_status.h"
#include "tfmpi/bindings/tensorflow/variables.h"
#include "tfmpi/runtime/collective_clock.h"
#include "tfmpi/runtime/global_engine.h"

namespace tfmpi::tf {
namespace {

using ::tensorflow::AsyncOpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;

Shape ShapeOf(const Tensor& t) {
  Shape s;
  for (int i = 0; i < t.dims(); ++i) s.push_back(t.dim_size(i));
  return s;
}

void* DataOf(const Tensor& t) { return const_cast<char*>(t.tensor_data().data()); }

// Completes an op after `pending` engine requests finished; keeps the first
// error. Its lifetime is the collective's time on the collective clock (Note
// [Time in collectives]).
class Countdown {
 public:
  Countdown(OpKernelContext* ctx, AsyncOpKernel::DoneCallback done, int pending)
      : ctx_(ctx), done_(std::move(done)), pending_(pending) {
    CollectiveStarted();
  }
  void Finish(const Status& s) {
    if (!s.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      if (first_error_.ok()) first_error_ = s;
    }
    if (--pending_ == 0) {
      CollectiveFinished();
      if (!first_error_.ok()) ctx_->SetStatus(ToTfStatus(first_error_));
      done_();
    }
  }

 private:
  OpKernelContext* ctx_;
  AsyncOpKernel::DoneCallback done_;
  std::atomic<int> pending_;
  std::mutex mu_;
  Status first_error_;
};

// Validates the dtype and fills the common request fields. On an unsupported
// dtype, finishes the countdown with the error and returns false.
bool Prepare(const Tensor& input, const std::shared_ptr<Countdown>& countdown, Request* req) {
  DataType dtype;
  if (!ToTfmpiDtype(input.dtype(), &dtype)) {
    countdown->Finish(Status::InvalidArgument("unsupported dtype for tfmpi"));
    return false;
  }
  req->meta.dtype = dtype;
  req->meta.shape = ShapeOf(input);
  req->input = input.tensor_data().data();
  req->done = [countdown](const Status& s) { countdown->Finish(s); };
  return true;
}

// Enqueues the requests together (one engine cycle sees them all); each one
// the engine refuses finishes the countdown with its error.
void SubmitAll(Engine* engine, std::vector<Request> reqs,
               const std::shared_ptr<Countdown>& countdown) {
  for (const Status& s : engine->EnqueueAll(std::move(reqs)))
    if (!s.ok()) countdown->Finish(s);
}

Engine* EngineOrFail(OpKernelContext* ctx, const AsyncOpKernel::DoneCallback& done) {
  Status why;
  Engine* e = GlobalEngine(&why);
  if (!e) {
    ctx->SetStatus(ToTfStatus(why));
    done();
  }
  return e;
}

ReduceOp ReduceOpAttr(OpKernelConstruction* c) {
  std::string op = "sum";
  auto s = c->GetAttr("reduce_op", &op);
  if (!s.ok()) c->CtxFailure(s);
  return ParseReduceOp(op).value_or(ReduceOp::kSum);
}

// Allreduce and broadcast, single or grouped: output i has input i's shape
// and is computed by one engine request per input.
class ElementwiseCollectiveOp : public AsyncOpKernel {
 public:
  explicit ElementwiseCollectiveOp(OpKernelConstruction* c) : AsyncOpKernel(c) {
    if (c->HasAttr("tensor_names")) {
      OP_REQUIRES_OK(c, c->GetAttr("tensor_names", &names_));
    } else {
      names_.resize(1);
      OP_REQUIRES_OK(c, c->GetAttr("tensor_name", &names_[0]));
    }
  }

  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    Engine* engine = EngineOrFail(ctx, done);
    if (!engine) return;
    const int n = ctx->num_inputs();
    OP_REQUIRES_ASYNC(ctx, static_cast<int>(names_.size()) == n,
                      absl::InvalidArgumentError("tensor_names must name every input"), done);
    std::vector<Tensor*> outputs(n);
    for (int i = 0; i < n; ++i)
      OP_REQUIRES_OK_ASYNC(ctx, ctx->forward_input_or_allocate_output(
                                    {i}, i, ctx->input(i).shape(), &outputs[i]),
                           done);
    auto countdown = std::make_shared<Countdown>(ctx, std::move(done), n);
    std::vector<Request> reqs;
    reqs.reserve(n);
    for (int i = 0; i < n; ++i) {
      Request req;
      req.meta.name = names_[i];
      Describe(&req.meta, i);
      req.output = DataOf(*outputs[i]);
      if (Prepare(ctx->input(i), countdown, &req)) reqs.push_back(std::move(req));
    }
    SubmitAll(engine, std::move(reqs), countdown);
  }

 protected:
  // Fills in the kind and its parameters (op, root) of input i.
  virtual void Describe(TensorMeta* meta, int i) const = 0;

 private:
  std::vector<std::string> names_;
};

class AllreduceOp : public ElementwiseCollectiveOp {
 public:
  explicit AllreduceOp(OpKernelConstruction* c) : ElementwiseCollectiveOp(c), op_(ReduceOpAttr(c)) {}

 protected:
  void Describe(TensorMeta* meta, int) const override {
    meta->kind = CollectiveKind::kAllreduce;
    meta->op = op_;
  }

 private:
  ReduceOp op_;
};

// Broadcast from one root (root_rank) or, per input, from root_ranks[i]
// (TfmpiOwnersBroadcast, TfmpiGroupedReduce).
class RootedOp : public ElementwiseCollectiveOp {
 public:
  RootedOp(OpKernelConstruction* c, CollectiveKind kind) : ElementwiseCollectiveOp(c), kind_(kind) {
    if (c->HasAttr("root_ranks")) {
      OP_REQUIRES_OK(c, c->GetAttr("root_ranks", &roots_));
      OP_REQUIRES(c, static_cast<int>(roots_.size()) == c->num_inputs(),
                  absl::InvalidArgumentError("root_ranks must name a root for every input"));
    } else {
      int root = 0;
      OP_REQUIRES_OK(c, c->GetAttr("root_rank", &root));
      roots_.assign(static_cast<std::size_t>(c->num_inputs()), root);
    }
    if (kind == CollectiveKind::kReduce) op_ = ReduceOpAttr(c);
  }

 protected:
  void Describe(TensorMeta* meta, int i) const override {
    meta->kind = kind_;
    meta->root = roots_[static_cast<std::size_t>(i)];
    meta->op = op_;
  }

 private:
  CollectiveKind kind_;
  std::vector<int> roots_;
  ReduceOp op_ = ReduceOp::kSum;
};

class BroadcastOp : public RootedOp {
 public:
  explicit BroadcastOp(OpKernelConstruction* c) : RootedOp(c, CollectiveKind::kBroadcast) {}
};

class OwnerReduceOp : public RootedOp {
 public:
  explicit OwnerReduceOp(OpKernelConstruction* c) : RootedOp(c, CollectiveKind::kReduce) {}
};

class AllgatherOp : public AsyncOpKernel {
 public:
  explicit AllgatherOp(OpKernelConstruction* c) : AsyncOpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("tensor_name", &name_));
  }

  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    Engine* engine = EngineOrFail(ctx, done);
    if (!engine) return;
    OP_REQUIRES_ASYNC(ctx, ctx->input(0).dims() >= 1,
                      absl::InvalidArgumentError("tfmpi allgather needs a tensor of rank >= 1"),
                      done);
    auto countdown = std::make_shared<Countdown>(ctx, std::move(done), 1);
    Request req;
    req.meta.name = name_;
    req.meta.kind = CollectiveKind::kAllgather;
    req.allocate_output = [ctx](const Shape& shape) -> void* {
      TensorShape ts;
      for (std::int64_t d : shape) ts.AddDim(d);
      Tensor* out = nullptr;
      if (!ctx->allocate_output(0, ts, &out).ok()) return nullptr;
      return DataOf(*out);
    };
    if (!Prepare(ctx->input(0), countdown, &req)) return;
    std::vector<Request> reqs;
    reqs.push_back(std::move(req));
    SubmitAll(engine, std::move(reqs), countdown);
  }

 private:
  std::string name_;
};

// TfmpiOwnersBroadcastVariables: every rank's variable i gets its value on
// rank root_ranks[i], received straight into the variable's buffer (the
// engine runs the requests in place: input and output are that buffer), so no
// second copy of the values is made and none assigned after. Every variable is
// checked first (initialized, a dtype the engine moves), so a failed check
// changes none. Then, one variable at a time under its lock, a receiving
// rank's variable is made this op's alone (MakeExclusive: a value read before
// keeps its contents; the new buffer's contents are not kept, the op writes
// them all); the root's buffer is only read. Locks are not held while the
// collective runs: the step's ops that use a variable are ordered around this
// op by its resource inputs, as for any op that writes one. If the collective
// fails, a receiving variable's contents are undefined (the op fails, and the
// job with it).
class OwnersBroadcastVariablesOp : public AsyncOpKernel {
 public:
  explicit OwnersBroadcastVariablesOp(OpKernelConstruction* c) : AsyncOpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("tensor_names", &names_));
    OP_REQUIRES_OK(c, c->GetAttr("root_ranks", &roots_));
    OP_REQUIRES(c, names_.size() == roots_.size() &&
                       static_cast<int>(names_.size()) == c->num_inputs(),
                absl::InvalidArgumentError(
                    "tensor_names and root_ranks must name every variable"));
  }

  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    Engine* engine = EngineOrFail(ctx, done);
    if (!engine) return;
    const int n = ctx->num_inputs();
    std::vector<::tensorflow::core::RefCountPtr<::tensorflow::Var>> vars(n);
    for (int i = 0; i < n; ++i) {
      OP_REQUIRES_OK_ASYNC(ctx, ::tensorflow::LookupResource(
                                    ctx, ::tensorflow::HandleFromInput(ctx, i), &vars[i]),
                           done);
      for (int j = 0; j < i; ++j)
        OP_REQUIRES_ASYNC(ctx, vars[i].get() != vars[j].get(),
                          absl::InvalidArgumentError(absl::StrCat(
                              "TfmpiOwnersBroadcastVariables: ", names_[j], " and ", names_[i],
                              " are the same variable")),
                          done);
      ::tensorflow::tf_shared_lock lock(*vars[i]->mu());
      const Tensor& t = *vars[i]->tensor();
      OP_REQUIRES_ASYNC(ctx, vars[i]->is_initialized && t.IsInitialized(),
                        absl::FailedPreconditionError(absl::StrCat(
                            "TfmpiOwnersBroadcastVariables: ", names_[i], " is not initialized")),
                        done);
      DataType dtype;
      OP_REQUIRES_ASYNC(ctx, ToTfmpiDtype(t.dtype(), &dtype),
                        absl::InvalidArgumentError(absl::StrCat(
                            "TfmpiOwnersBroadcastVariables: ", names_[i], " is of ",
                            ::tensorflow::DataTypeString(t.dtype()),
                            ", a dtype tfmpi does not move")),
                        done);
    }
    // The buffers written, held until the op is done.
    auto buffers = std::make_shared<std::vector<Tensor>>(n);
    for (int i = 0; i < n; ++i) {
      ::tensorflow::mutex_lock lock(*vars[i]->mu());
      if (roots_[static_cast<std::size_t>(i)] != engine->rank())
        OP_REQUIRES_OK_ASYNC(ctx, MakeExclusive(ctx, vars[i].get(), /*keep_contents=*/false),
                             done);
      (*buffers)[i] = *vars[i]->tensor();
    }
    // The buffers are let go before the op completes, so that the variables'
    // next writers find them unshared.
    auto countdown = std::make_shared<Countdown>(
        ctx,
        [buffers, done = std::move(done)]() {
          buffers->clear();
          done();
        },
        n);
    std::vector<Request> reqs;
    reqs.reserve(n);
    for (int i = 0; i < n; ++i) {
      Request req;
      req.meta.name = names_[static_cast<std::size_t>(i)];
      req.meta.kind = CollectiveKind::kBroadcast;
      req.meta.root = roots_[static_cast<std::size_t>(i)];
      req.output = DataOf((*buffers)[i]);
      if (Prepare((*buffers)[i], countdown, &req)) reqs.push_back(std::move(req));
    }
    SubmitAll(engine, std::move(reqs), countdown);
  }

 private:
  std::vector<std::string> names_;
  std::vector<int> roots_;
};

class WorldOp : public ::tensorflow::OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    Status why;
    Engine* e = GlobalEngine(&why);
    OP_REQUIRES_OK(ctx, ToTfStatus(why));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({4}), &out));
    auto v = out->vec<std::int32_t>();
    v(0) = e->rank();
    v(1) = e->size();
    v(2) = e->local_rank();
    v(3) = e->local_size();
  }
};

REGISTER_KERNEL_BUILDER(Name("TfmpiAllreduce").Device(::tensorflow::DEVICE_CPU), AllreduceOp);
REGISTER_KERNEL_BUILDER(Name("TfmpiGroupedAllreduce").Device(::tensorflow::DEVICE_CPU), AllreduceOp);
REGISTER_KERNEL_BUILDER(Name("TfmpiBroadcast").Device(::tensorflow::DEVICE_CPU), BroadcastOp);
REGISTER_KERNEL_BUILDER(Name("TfmpiGroupedBroadcast").Device(::tensorflow::DEVICE_CPU), BroadcastOp);
REGISTER_KERNEL_BUILDER(Name("TfmpiOwnersBroadcast").Device(::tensorflow::DEVICE_CPU), BroadcastOp);
REGISTER_KERNEL_BUILDER(Name("TfmpiOwnersBroadcastVariables").Device(::tensorflow::DEVICE_CPU),
                        OwnersBroadcastVariablesOp);
REGISTER_KERNEL_BUILDER(Name("TfmpiGroupedReduce").Device(::tensorflow::DEVICE_CPU), OwnerReduceOp);
REGISTER_KERNEL_BUILDER(Name("TfmpiAllgather").Device(::tensorflow::DEVICE_CPU), AllgatherOp);
REGISTER_KERNEL_BUILDER(Name("TfmpiWorld").Device(::tensorflow::DEVICE_CPU), WorldOp);

}  // namespace
}  // namespace tfmpi::tf
