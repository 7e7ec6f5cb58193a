// Registration of the row-reader ops (src/tfmpi/data); kernels in
// data_kernels.cc, Python in python/tfmpi/data/.
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tfmpi::tf {

using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

// Attributes that say which file and columns a reader opens.
#define TFMPI_READER_ATTRS                  \
  Attr("format: {'npy', 'csv', 'hdf5', 'netcdf'}") \
      .Attr("path: string")                 \
      .Attr("names: list(string) = []")     \
      .Attr("csv_header: bool = true")      \
      .Attr("csv_delimiter: string = ','")

REGISTER_OP("TfmpiReadRows")
    .Input("indices: int64")
    .Output("rows: dtypes")
    .Attr("dtypes: list(type) >= 1")
    .Attr("row_shapes: list(shape)")
    .TFMPI_READER_ATTRS
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle indices;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 1, &indices));
      std::vector<::tensorflow::PartialTensorShape> row_shapes;
      TF_RETURN_IF_ERROR(c->GetAttr("row_shapes", &row_shapes));
      if (static_cast<int>(row_shapes.size()) != c->num_outputs()) {
        return absl::InvalidArgumentError("TfmpiReadRows: one row shape per dtype");
      }
      for (int i = 0; i < c->num_outputs(); ++i) {
        ShapeHandle row, out;
        TF_RETURN_IF_ERROR(c->MakeShapeFromPartialTensorShape(row_shapes[i], &row));
        TF_RETURN_IF_ERROR(c->Concatenate(indices, row, &out));
        c->set_output(i, out);
      }
      return absl::OkStatus();
    })
    .Doc("Rows `indices` of a file's columns; column i as dtypes[i], [k] + row_shapes[i]. "
         "For CSV, dtypes are the columns' types; otherwise they must match the file.");

REGISTER_OP("TfmpiDescribeRows")
    .Output("num_rows: int64")
    .Output("column_names: string")
    .Output("column_types: string")
    .Output("row_shapes: string")
    .Attr("csv_types: list(type) = []")
    .TFMPI_READER_ATTRS
    .SetIsStateful()
    .Doc("Opens a file as TfmpiReadRows would: its row count and, per column, name, "
         "element type name and row shape (\"2,3\"; \"\" for a scalar).");

REGISTER_OP("TfmpiBytesRead")
    .Output("bytes: int64")
    .SetIsStateful()
    .SetShapeFn(::tensorflow::shape_inference::ScalarShape)
    .Doc("Bytes this process has read from data files through the row readers.");

}  // namespace tfmpi::tf
