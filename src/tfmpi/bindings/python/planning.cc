// Python bindings of the work-share planner (planning/shares.h), used by
// transparent mode's live rebalancing (python/tfmpi/transparent/shares.py),
// and of the thread plan (planning/threads.h, python/tfmpi/transparent/threads.py).
// The planner decides; Python only measures and applies the result.
#include "tfmpi/bindings/python/planning.h"

#include <pybind11/stl.h>

#include "tfmpi/planning/shares.h"
#include "tfmpi/planning/threads.h"
#include "tfmpi/probe/host_cpus.h"
#include "tfmpi/runtime/collective_clock.h"

namespace py = pybind11;

namespace tfmpi::bindings {
namespace {

py::dict ThreadPlanFor(int local_rank, int local_size, bool bind) {
  const probe::HostCpus cpus = probe::ReadHostCpus();
  const planning::ThreadPlan plan =
      planning::PlanThreads(cpus.affinity, cpus.quota, local_rank, local_size, bind);
  py::dict d;
  d["cores"] = plan.cores;
  d["intra_op"] = plan.intra_op;
  d["inter_op"] = plan.inter_op;
  d["bind_cpus"] = plan.bind_cpus;
  d["apply"] = plan.apply;
  d["why"] = plan.why;
  d["quota_source"] = cpus.quota_source;
  return d;
}

void BindProcess(const std::vector<int>& cpus) {
  std::string error;
  if (!probe::BindProcessTo(cpus, &error)) throw std::runtime_error(error);
}

}  // namespace

void RegisterPlanning(py::module_& m) {
  using planning::RebalanceOptions;
  using planning::Rebalancer;
  m.def("thread_plan", &ThreadPlanFor, py::arg("local_rank"), py::arg("local_size"),
        py::arg("bind"),
        "This rank's thread pools and CPUs on its host (Note [Threads per rank]): a dict "
        "with cores, intra_op, inter_op, bind_cpus, apply (False: keep TensorFlow's "
        "defaults), why and quota_source.");
  m.def("bind_process", &BindProcess, py::arg("cpus"),
        "Keep only `cpus` in the affinity of every thread of this process.");
  m.def("share_fractions", &planning::ShareFractions, py::arg("speeds"),
        "Fractions proportional to `speeds`, summing to 1 (equal when no speed is positive).");
  m.def("share_cuts", &planning::Cuts, py::arg("fractions"),
        "The cuts 0 = c_0 <= ... <= c_N = 1 of `fractions`.");
  m.def("slice_sizes", &planning::SliceSizes, py::arg("fractions"), py::arg("batch"),
        "Each rank's slice size of a batch of `batch` samples.");
  m.def("collective_seconds", &CollectiveSeconds,
        "Seconds this process has spent in TensorFlow-op collectives (overlaps counted once).");
  py::class_<Rebalancer>(m, "Rebalancer")
      .def(py::init([](std::vector<double> fractions, double smoothing, double min_gain) {
             RebalanceOptions options;
             options.smoothing = smoothing;
             options.min_gain = min_gain;
             return Rebalancer(std::move(fractions), options);
           }),
           py::arg("fractions"), py::arg("smoothing") = RebalanceOptions{}.smoothing,
           py::arg("min_gain") = RebalanceOptions{}.min_gain)
      .def("observe", &Rebalancer::Observe, py::arg("seconds"), py::arg("samples"), py::arg("batch"),
           "Take each rank's compute seconds and samples since the last call; True when the "
           "shares changed.")
      .def_property_readonly("fractions", &Rebalancer::fractions)
      .def_property_readonly("awaiting_confirmation", &Rebalancer::awaiting_confirmation)
      .def_property_readonly("seconds_per_sample", &Rebalancer::seconds_per_sample);
}

}  // namespace tfmpi::bindings
