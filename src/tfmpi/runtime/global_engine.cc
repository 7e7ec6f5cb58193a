#include "tfmpi/runtime/global_engine.h"

#include <memory>
#include <mutex>
#include <utility>

#include "tfmpi/runtime/mpi_factory.h"

namespace tfmpi {
namespace {

std::mutex g_mu;
std::unique_ptr<Engine> g_engine;
bool g_was_shut_down = false;

}  // namespace

Status InitGlobalEngine(const EnvLookup& lookup,
                        std::vector<std::pair<std::string, std::string>> caller_settings) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_engine && !g_was_shut_down) return Status::Ok();
  if (g_was_shut_down)
    return Status::FailedPrecondition(
        "tfmpi was shut down in this process and can't be initialised again (MPI allows one "
        "init per process)");
  EngineOptions options;
  TFMPI_RETURN_IF_ERROR(ResolveEngineOptions(lookup, &options));
  options.caller_settings = std::move(caller_settings);
  return Engine::Start(options, MakeMpiCommunicatorFactory(options), &g_engine);
}

void ShutdownGlobalEngine() {
  Engine* engine;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!g_engine || g_was_shut_down) return;
    engine = g_engine.get();
    g_was_shut_down = true;
  }
  // The engine object stays alive: a thread still holding the pointer gets
  // "shut down" errors from it instead of touching freed memory.
  engine->Shutdown();
}

void SetGlobalExitReason(const std::string& reason) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_engine && !g_was_shut_down) g_engine->SetExitReason(reason);
}

Engine* GlobalEngine(Status* why) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_engine || g_was_shut_down) {
    *why = Status::FailedPrecondition(
        g_was_shut_down ? "tfmpi has been shut down; collectives are no longer available"
                        : "tfmpi is not initialised: call tfmpi.init() first");
    return nullptr;
  }
  return g_engine.get();
}

}  // namespace tfmpi
