// Registration of the tfmpi TensorFlow ops (shapes and attributes). Kernels
// live in kernels.cc; gradients are registered in python/tfmpi/tensorflow/ops.py.
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tfmpi::tf {

using ::tensorflow::shape_inference::InferenceContext;

#define TFMPI_TYPES "{half, bfloat16, float, double, int32, int64, uint8, bool}"

namespace {

// Grouped ops: output i has input i's shape.
absl::Status EachInputsShape(InferenceContext* c) {
  for (int i = 0; i < c->num_inputs(); ++i) c->set_output(i, c->input(i));
  return absl::OkStatus();
}

}  // namespace

REGISTER_OP("TfmpiAllreduce")
    .Input("tensor: T")
    .Output("sum: T")
    .Attr("T: " TFMPI_TYPES)
    .Attr("reduce_op: {'sum', 'average', 'min', 'max', 'product'} = 'sum'")
    .Attr("tensor_name: string")
    .SetIsStateful()
    .SetShapeFn(::tensorflow::shape_inference::UnchangedShape)
    .Doc("Reduces `tensor` element-wise over all ranks; matched across ranks by tensor_name.");

REGISTER_OP("TfmpiGroupedAllreduce")
    .Input("tensors: T")
    .Output("reduced: T")
    .Attr("T: list(" TFMPI_TYPES ")")
    .Attr("reduce_op: {'sum', 'average', 'min', 'max', 'product'} = 'sum'")
    .Attr("tensor_names: list(string)")
    .SetIsStateful()
    .SetShapeFn(EachInputsShape)
    .Doc("Allreduces a list of tensors as one op (one engine request each, fused).");

REGISTER_OP("TfmpiBroadcast")
    .Input("tensor: T")
    .Output("output: T")
    .Attr("T: " TFMPI_TYPES)
    .Attr("root_rank: int")
    .Attr("tensor_name: string")
    .SetIsStateful()
    .SetShapeFn(::tensorflow::shape_inference::UnchangedShape)
    .Doc("Every rank receives root_rank's tensor.");

REGISTER_OP("TfmpiGroupedBroadcast")
    .Input("tensors: T")
    .Output("outputs: T")
    .Attr("T: list(" TFMPI_TYPES ")")
    .Attr("root_rank: int")
    .Attr("tensor_names: list(string)")
    .SetIsStateful()
    .SetShapeFn(EachInputsShape)
    .Doc("Broadcasts a list of tensors from root_rank as one op.");

REGISTER_OP("TfmpiOwnersBroadcast")
    .Input("tensors: T")
    .Output("outputs: T")
    .Attr("T: list(" TFMPI_TYPES ")")
    .Attr("root_ranks: list(int)")
    .Attr("tensor_names: list(string)")
    .SetIsStateful()
    .SetShapeFn(EachInputsShape)
    .Doc("Every rank receives each tensor from its own root, root_ranks[i], as one op.");

REGISTER_OP("TfmpiOwnersBroadcastVariables")
    .Input("variables: N * resource")
    .Attr("N: int >= 1")
    .Attr("root_ranks: list(int)")
    .Attr("tensor_names: list(string)")
    .SetIsStateful()
    .SetShapeFn(::tensorflow::shape_inference::NoOutputs)
    .Doc("Every rank's variable i gets its value on rank root_ranks[i], received in place.");

REGISTER_OP("TfmpiGroupedReduce")
    .Input("tensors: T")
    .Output("reduced: T")
    .Attr("T: list(" TFMPI_TYPES ")")
    .Attr("reduce_op: {'sum', 'average', 'min', 'max', 'product'} = 'sum'")
    .Attr("root_ranks: list(int)")
    .Attr("tensor_names: list(string)")
    .SetIsStateful()
    .SetShapeFn(EachInputsShape)
    .Doc("Reduces tensor i over all ranks onto rank root_ranks[i] only (its owner); on the "
         "other ranks output i is input i. One op: the engine runs it as reduce-scatters.");

REGISTER_OP("TfmpiAllgather")
    .Input("tensor: T")
    .Output("output: T")
    .Attr("T: " TFMPI_TYPES)
    .Attr("tensor_name: string")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      ::tensorflow::shape_inference::ShapeHandle out;
      TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(0), 1, &out));
      TF_RETURN_IF_ERROR(c->ReplaceDim(out, 0, c->UnknownDim(), &out));
      c->set_output(0, out);
      return absl::OkStatus();
    })
    .Doc("Concatenates every rank's tensor along axis 0 (first dimensions may differ).");

REGISTER_OP("TfmpiWorld")
    .Output("rank_size: int32")
    .Doc("[rank, size, local_rank, local_size] of the running engine.");

}  // namespace tfmpi::tf
