// Kernels of the row-reader ops: a thin layer over src/tfmpi/data. Each
// TfmpiReadRows kernel instance opens its file once, on first use, and reuses
// the reader (thread-safe, see row_reader.h) for every call.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tfmpi/bindings/tensorflow/tf_status.h"
#include "tfmpi/data/bytes_read.h"
#include "tfmpi/data/open_reader.h"

namespace tfmpi::tf {
namespace {

using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;
using data::ElementType;

tensorflow::DataType TfTypeOf(ElementType t) {
  switch (t) {
    case ElementType::kBool: return tensorflow::DT_BOOL;
    case ElementType::kInt8: return tensorflow::DT_INT8;
    case ElementType::kInt16: return tensorflow::DT_INT16;
    case ElementType::kInt32: return tensorflow::DT_INT32;
    case ElementType::kInt64: return tensorflow::DT_INT64;
    case ElementType::kUInt8: return tensorflow::DT_UINT8;
    case ElementType::kUInt16: return tensorflow::DT_UINT16;
    case ElementType::kUInt32: return tensorflow::DT_UINT32;
    case ElementType::kUInt64: return tensorflow::DT_UINT64;
    case ElementType::kFloat16: return tensorflow::DT_HALF;
    case ElementType::kFloat32: return tensorflow::DT_FLOAT;
    case ElementType::kFloat64: return tensorflow::DT_DOUBLE;
  }
  return tensorflow::DT_INVALID;
}

absl::Status ElementTypeOf(tensorflow::DataType t, ElementType* out) {
  for (int i = 0; i <= static_cast<int>(ElementType::kFloat64); ++i) {
    if (TfTypeOf(static_cast<ElementType>(i)) == t) {
      *out = static_cast<ElementType>(i);
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(fmt::format(
      "tfmpi.data: {} is not a row reader type (bool, int8..int64, uint8..uint64, float16, "
      "float32, float64)",
      tensorflow::DataTypeString(t)));
}

// The reader attributes shared by both ops (TFMPI_READER_ATTRS in data_ops.cc).
absl::Status ReaderSpecFrom(OpKernelConstruction* ctx, const char* types_attr,
                            data::ReaderSpec* spec) {
  TF_RETURN_IF_ERROR(ctx->GetAttr("format", &spec->format));
  TF_RETURN_IF_ERROR(ctx->GetAttr("path", &spec->path));
  TF_RETURN_IF_ERROR(ctx->GetAttr("names", &spec->names));
  TF_RETURN_IF_ERROR(ctx->GetAttr("csv_header", &spec->csv.header));
  std::string delimiter;
  TF_RETURN_IF_ERROR(ctx->GetAttr("csv_delimiter", &delimiter));
  if (delimiter.size() != 1) {
    return absl::InvalidArgumentError(fmt::format(
        "tfmpi.data.csv: the delimiter must be one character, got '{}'", delimiter));
  }
  spec->csv.delimiter = delimiter[0];
  if (spec->format == "csv") {
    std::vector<tensorflow::DataType> types;
    TF_RETURN_IF_ERROR(ctx->GetAttr(types_attr, &types));
    for (tensorflow::DataType t : types) {
      ElementType e;
      TF_RETURN_IF_ERROR(ElementTypeOf(t, &e));
      spec->csv.types.push_back(e);
    }
  }
  return absl::OkStatus();
}

class ReadRowsOp : public OpKernel {
 public:
  explicit ReadRowsOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ReaderSpecFrom(ctx, "dtypes", &spec_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("dtypes", &dtypes_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("row_shapes", &row_shapes_));
  }

  void Compute(OpKernelContext* ctx) override {
    const data::RowReader* reader = nullptr;
    OP_REQUIRES_OK(ctx, Reader(&reader));
    const Tensor& indices = ctx->input(0);
    OP_REQUIRES(ctx, indices.dims() == 1,
                absl::InvalidArgumentError("TfmpiReadRows: indices must be a vector"));
    const std::int64_t k = indices.dim_size(0);
    std::vector<void*> outputs;
    for (std::size_t c = 0; c < reader->columns().size(); ++c) {
      TensorShape shape({k});
      for (std::int64_t d : reader->columns()[c].row_shape) shape.AddDim(d);
      Tensor* out = nullptr;
      OP_REQUIRES_OK(ctx, ctx->allocate_output(static_cast<int>(c), shape, &out));
      outputs.push_back(const_cast<char*>(out->tensor_data().data()));
    }
    OP_REQUIRES_OK(ctx, ToTfStatus(reader->Read(indices.flat<std::int64_t>().data(),
                                                static_cast<std::size_t>(k), outputs)));
  }

 private:
  // Opens the file on first use and checks it still has the columns the graph
  // was built for (the file may have changed since tfmpi.data described it).
  absl::Status Reader(const data::RowReader** out) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!reader_) {
      std::unique_ptr<data::RowReader> reader;
      TF_RETURN_IF_ERROR(ToTfStatus(data::OpenRowReader(spec_, &reader)));
      const auto& columns = reader->columns();
      if (columns.size() != dtypes_.size()) {
        return absl::InvalidArgumentError(fmt::format(
            "{}: has {} columns but the dataset was built for {}; did the file change?",
            spec_.path, columns.size(), dtypes_.size()));
      }
      for (std::size_t c = 0; c < columns.size(); ++c) {
        tensorflow::PartialTensorShape row(columns[c].row_shape);
        if (TfTypeOf(columns[c].type) != dtypes_[c] || !row_shapes_[c].IsCompatibleWith(row)) {
          return absl::InvalidArgumentError(fmt::format(
              "{}: column '{}' is {} rows of shape {} but the dataset was built for {} {}; "
              "did the file change?",
              spec_.path, columns[c].name, ElementTypeName(columns[c].type),
              row.DebugString(), tensorflow::DataTypeString(dtypes_[c]),
              row_shapes_[c].DebugString()));
        }
      }
      reader_ = std::move(reader);
    }
    *out = reader_.get();
    return absl::OkStatus();
  }

  data::ReaderSpec spec_;
  std::vector<tensorflow::DataType> dtypes_;
  std::vector<tensorflow::PartialTensorShape> row_shapes_;
  std::mutex mu_;
  std::unique_ptr<data::RowReader> reader_;
};

class DescribeRowsOp : public OpKernel {
 public:
  explicit DescribeRowsOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ReaderSpecFrom(ctx, "csv_types", &spec_));
  }

  void Compute(OpKernelContext* ctx) override {
    std::unique_ptr<data::RowReader> reader;
    OP_REQUIRES_OK(ctx, ToTfStatus(data::OpenRowReader(spec_, &reader)));
    const auto& columns = reader->columns();
    const std::int64_t c = static_cast<std::int64_t>(columns.size());
    Tensor *rows, *names, *types, *shapes;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({}), &rows));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({c}), &names));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(2, TensorShape({c}), &types));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(3, TensorShape({c}), &shapes));
    rows->scalar<std::int64_t>()() = reader->rows();
    for (std::int64_t i = 0; i < c; ++i) {
      names->flat<tensorflow::tstring>()(i) = columns[i].name;
      types->flat<tensorflow::tstring>()(i) = ElementTypeName(columns[i].type);
      shapes->flat<tensorflow::tstring>()(i) = fmt::format("{}", fmt::join(columns[i].row_shape, ","));
    }
  }

 private:
  data::ReaderSpec spec_;
};

class BytesReadOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({}), &out));
    out->scalar<std::int64_t>()() = data::BytesRead();
  }
};

REGISTER_KERNEL_BUILDER(Name("TfmpiReadRows").Device(tensorflow::DEVICE_CPU), ReadRowsOp);
REGISTER_KERNEL_BUILDER(Name("TfmpiDescribeRows").Device(tensorflow::DEVICE_CPU), DescribeRowsOp);
REGISTER_KERNEL_BUILDER(Name("TfmpiBytesRead").Device(tensorflow::DEVICE_CPU), BytesReadOp);

}  // namespace
}  // namespace tfmpi::tf
