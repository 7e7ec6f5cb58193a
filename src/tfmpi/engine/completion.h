// Completion: a one-shot latch a caller waits on for a request's Status.
// Callback() hands the engine a DoneCallback that fills it; copies share state.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

#include "tfmpi/engine/request.h"

namespace tfmpi {

class Completion {
 public:
  Completion() : state_(std::make_shared<State>()) {}

  DoneCallback Callback() const {
    return [state = state_](const Status& s) {
      {
        std::lock_guard<std::mutex> lock(state->mu);
        state->status = s;
        state->done = true;
      }
      state->cv.notify_all();
    };
  }

  Status Wait() const {
    std::unique_lock<std::mutex> lock(state_->mu);
    state_->cv.wait(lock, [&] { return state_->done; });
    return state_->status;
  }

  // False on timeout; otherwise stores the Status.
  template <typename Rep, typename Period>
  bool WaitFor(std::chrono::duration<Rep, Period> timeout, Status* out) const {
    std::unique_lock<std::mutex> lock(state_->mu);
    if (!state_->cv.wait_for(lock, timeout, [&] { return state_->done; })) return false;
    *out = state_->status;
    return true;
  }

  bool done() const {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->done;
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    Status status;
  };
  std::shared_ptr<State> state_;
};

}  // namespace tfmpi
