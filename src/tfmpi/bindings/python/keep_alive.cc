#include "tfmpi/bindings/python/keep_alive.h"

#include <utility>

namespace tfmpi::bindings {
namespace {

struct Orphan {
  Completion completion;
  std::vector<py::object> objects;
};

// Guarded by the GIL. Never destroyed: a static destructor would release
// Python objects after the interpreter is gone.
std::vector<Orphan>& Orphans() {
  static auto* orphans = new std::vector<Orphan>();
  return *orphans;
}

}  // namespace

void KeepAlive::Adopt(const Completion& completion, std::vector<py::object> objects) {
  Orphans().push_back({completion, std::move(objects)});
}

void KeepAlive::Reap() {
  std::vector<Orphan>& orphans = Orphans();
  std::vector<Orphan> finished;
  for (std::size_t i = 0; i < orphans.size();) {
    if (orphans[i].completion.done()) {
      finished.push_back(std::move(orphans[i]));
      if (i + 1 != orphans.size()) orphans[i] = std::move(orphans.back());
      orphans.pop_back();
    } else {
      ++i;
    }
  }
  // Released only now: freeing an object may run Python code (and so another
  // Reap) while the list is consistent again.
  finished.clear();
}

}  // namespace tfmpi::bindings
