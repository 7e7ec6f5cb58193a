// tfmpi._core: the Python face of the engine for numpy arrays. The Python
// package wraps it (tfmpi/__init__.py); no communication logic lives there.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "tfmpi/bindings/python/handle.h"
#include "tfmpi/bindings/python/keep_alive.h"
#include "tfmpi/bindings/python/planning.h"
#include "tfmpi/bindings/python/status_error.h"
#include "tfmpi/engine/options.h"
#include "tfmpi/runtime/global_engine.h"

namespace tfmpi::bindings {
namespace {

std::optional<std::string> Getenv(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (!v) return std::nullopt;
  return std::string(v);
}

Engine* RequireEngine() {
  Status why;
  Engine* e = GlobalEngine(&why);
  if (!e) throw StatusError(why);
  return e;
}

DataType DtypeOf(const py::array& a) {
  std::string name = py::str(a.dtype().attr("name"));
  if (auto d = ParseDataType(name)) return *d;
  throw StatusError(Status::InvalidArgument(
      "unsupported dtype " + name +
      "; tfmpi collectives take float16, bfloat16, float32, float64, int32, int64, uint8 or bool"));
}

Shape ShapeOf(const py::array& a) {
  Shape s;
  for (py::ssize_t i = 0; i < a.ndim(); ++i) s.push_back(a.shape(i));
  return s;
}

std::shared_ptr<Handle> Submit(Request req, py::object in, py::object out,
                               std::shared_ptr<GatherOutput> gather, py::dtype dtype) {
  KeepAlive::Reap();
  Engine* engine = RequireEngine();
  Completion completion;
  req.done = completion.Callback();
  std::string name = req.meta.name;
  ThrowIfError(engine->Enqueue(std::move(req)));
  return std::make_shared<Handle>(std::move(name), completion, std::move(in), std::move(out),
                                  std::move(gather), std::move(dtype));
}

ReduceOp ParseOp(const std::string& op) {
  if (auto parsed = ParseReduceOp(op)) return *parsed;
  throw StatusError(Status::InvalidArgument(
      "unknown reduce op '" + op + "'; use one of sum, average, min, max, product"));
}

// Inputs arrive C-contiguous (the Python layer ensures it); outputs are fresh arrays.
std::shared_ptr<Handle> Allreduce(const std::string& name, py::array in, py::array out,
                                  const std::string& op) {
  Request r;
  r.meta = {name, CollectiveKind::kAllreduce, DtypeOf(in), ParseOp(op), 0, ShapeOf(in)};
  r.input = in.data();
  r.output = out.mutable_data();
  return Submit(std::move(r), in, out, nullptr, in.dtype());
}

std::shared_ptr<Handle> Broadcast(const std::string& name, py::array in, py::array out, int root) {
  Request r;
  r.meta = {name, CollectiveKind::kBroadcast, DtypeOf(in), ReduceOp::kSum, root, ShapeOf(in)};
  r.input = in.data();
  r.output = out.mutable_data();
  return Submit(std::move(r), in, out, nullptr, in.dtype());
}

std::shared_ptr<Handle> Allgather(const std::string& name, py::array in) {
  Request r;
  r.meta = {name, CollectiveKind::kAllgather, DtypeOf(in), ReduceOp::kSum, 0, ShapeOf(in)};
  r.input = in.data();
  auto gather = std::make_shared<GatherOutput>();
  const std::size_t elem = DataTypeSize(r.meta.dtype);
  r.allocate_output = [gather, elem](const Shape& shape) -> void* {
    gather->shape = shape;
    gather->data.resize(static_cast<std::size_t>(NumElements(shape)) * elem);
    return gather->data.data();  // never null: an empty vector's data() is fine for 0 bytes
  };
  return Submit(std::move(r), in, py::none(), gather, in.dtype());
}

std::shared_ptr<Handle> Barrier(const std::string& name) {
  Request r;
  r.meta = {name, CollectiveKind::kBarrier, DataType::kUInt8, ReduceOp::kSum, 0, {}};
  return Submit(std::move(r), py::none(), py::none(), nullptr, py::dtype("uint8"));
}

py::dict Stats() {
  EngineStats s = RequireEngine()->Stats();
  py::dict d;
  d["cycles"] = s.cycles;
  d["full_rounds"] = s.full_rounds;
  d["cache_hits"] = s.cache_hits;
  d["negotiation_seconds"] = s.negotiation_seconds;
  d["busy_cycles"] = s.busy_cycles;
  d["busy_negotiation_seconds"] = s.busy_negotiation_seconds;
  d["tensors"] = s.tensors;
  d["groups"] = s.groups;
  d["fused_groups"] = s.fused_groups;
  d["bytes"] = s.bytes;
  py::dict tune;
  tune["enabled"] = s.autotune.enabled;
  tune["done"] = s.autotune.done;
  tune["windows"] = s.autotune.windows;
  tune["message_elements"] = s.autotune.current.message_elements;
  tune["direct_threshold"] = s.autotune.current.direct_threshold;
  tune["fusion_threshold"] = s.autotune.current.fusion_threshold;
  d["autotune"] = tune;
  return d;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "tfmpi engine bindings (use the tfmpi package, not this module)";
  RegisterStatusTranslator();
  RegisterPlanning(m);

  py::class_<Handle, std::shared_ptr<Handle>>(m, "Handle")
      .def_property_readonly("name", &Handle::name)
      .def("done", &Handle::done, "True once the collective has completed (or failed).")
      .def("wait", &Handle::Wait, py::arg("timeout") = -1.0,
           "Block until complete and return the result (raises on failure).");

  m.def(
      "init",
      [](std::vector<std::pair<std::string, std::string>> settings) {
        Status s;
        {
          py::gil_scoped_release release;
          s = InitGlobalEngine(Getenv, std::move(settings));
        }
        ThrowIfError(s);
      },
      py::arg("settings") = std::vector<std::pair<std::string, std::string>>{},
      "Start the engine; `settings` ((name, value) pairs) must be the same on every rank.");
  m.def("shutdown", [] {
    {
      py::gil_scoped_release release;
      ShutdownGlobalEngine();
    }
    KeepAlive::Reap();  // every request has completed now
  });
  m.def("set_exit_reason", &SetGlobalExitReason, py::arg("reason"),
        "Why this rank is about to stop; shutdown() tells the other ranks.");
  m.def("is_initialized", [] {
    Status why;
    return GlobalEngine(&why) != nullptr;
  });
  m.def("rank", [] { return RequireEngine()->rank(); });
  m.def("size", [] { return RequireEngine()->size(); });
  m.def("local_rank", [] { return RequireEngine()->local_rank(); });
  m.def("local_size", [] { return RequireEngine()->local_size(); });
  m.def("transport", [] { return RequireEngine()->transport_name(); });
  m.def("engine_stats", &Stats);

  m.def("allreduce_async", &Allreduce, py::arg("name"), py::arg("input"), py::arg("output"),
        py::arg("op"));
  m.def("broadcast_async", &Broadcast, py::arg("name"), py::arg("input"), py::arg("output"),
        py::arg("root"));
  m.def("allgather_async", &Allgather, py::arg("name"), py::arg("input"));
  m.def("barrier_async", &Barrier, py::arg("name"));

  m.def("param_table", [] { return EngineParams().Table(Getenv); });
  m.def("check_params", [] {
    EngineOptions o;
    ThrowIfError(ResolveEngineOptions(Getenv, &o));
  });
  m.def("param_specs", [] {
    py::list out;
    for (const ParamSpec& s : EngineParams().specs()) {
      py::dict d;
      d["name"] = s.name;
      d["type"] = ParamRegistry::TypeName(s);
      d["default"] = s.default_value;
      d["accepted"] = ParamRegistry::AcceptedText(s);
      d["description"] = s.description;
      out.append(d);
    }
    return out;
  });
}

}  // namespace tfmpi::bindings
