// WorkCompleters.cpp - the completer threads of a WorkQueue: they complete its works
// (futures, callbacks and waiters) off the worker, and tell a barrier when the
// completions posted before it have run (design in WorkQueue.hpp).
#include "WorkQueue.hpp"

#include <system_error>

#include <c10/util/thread_name.h>

namespace smddp_torch {

thread_local const WorkQueue* completerOf = nullptr;

// ---- WorkQueue: completers ---------------------------------------------------------

void WorkQueue::awaitCompletions(std::chrono::steady_clock::time_point deadline) {
  // Past the deadline a callback is still running: the barrier goes on
  // (a slow callback is not a failure of the group).  A callback that
  // waits on a later work's future (not on the work) is not seen, and
  // holds the barrier that long, as it would hold gloo's for ever.  A
  // stop() ends the wait: the order no longer matters then.
  std::unique_lock<std::mutex> lock(mutex_);
  idleCv_.wait_until(lock, deadline, [&] {
    return stopRequested_ ||
        (completions_.empty() && runningCompletions_ <= waitingCompleters_);
  });
}

void WorkQueue::completerWaits(int delta) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    waitingCompleters_ += delta;
  }
  idleCv_.notify_all();
}

void WorkQueue::post(c10::intrusive_ptr<WorkSMDDP> work, std::exception_ptr error) {
  // No future, no callback: nothing a completer is needed for, and a
  // thread's wake-up less per call.
  if (work->completeWithoutFuture(error, [this] {
        std::lock_guard<std::mutex> lock(mutex_);
        --outstanding_;
      }))
    return;
  if (error) {
    // Before the completer runs: the next item on the worker may be the
    // end of a coalescing window, whose result is this error.
    std::lock_guard<std::mutex> lock(work->mutex_);
    work->runError_ = error;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  completions_.push_back({std::move(work), error});
  if (static_cast<int>(completions_.size()) <= idleCompleters_) {
    taskCv_.notify_one();
    return;
  }
  try {
    completers_.emplace_back([self = shared_from_this()] { self->completerLoop(); });
    ++liveCompleters_;
  } catch (const std::system_error&) {
    if (liveCompleters_ > 0) {
      taskCv_.notify_one(); // a busy completer gets to it later
      return;
    }
    // No thread to be had: complete it here, callbacks and all.
    Completion c = std::move(completions_.back());
    completions_.pop_back();
    lock.unlock();
    completeOne(c.work, c.error);
  }
}

void WorkQueue::completeOne(const c10::intrusive_ptr<WorkSMDDP>& work, std::exception_ptr error) {
  work->complete(error, [this] {
    std::lock_guard<std::mutex> lock(mutex_);
    --outstanding_;
  });
}

void WorkQueue::completerLoop() {
  c10::setThreadName("pt_smddp_done");
  completerOf = this;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    ++idleCompleters_;
    taskCv_.wait(lock, [&] { return !completions_.empty() || completersStop_; });
    --idleCompleters_;
    if (completions_.empty())
      break;
    Completion c = std::move(completions_.front());
    completions_.pop_front();
    ++runningCompletions_;
    lock.unlock();
    completeOne(c.work, c.error);
    c.work.reset();
    lock.lock();
    --runningCompletions_;
    idleCv_.notify_all();
  }
  --liveCompleters_;
  completerOf = nullptr;
  idleCv_.notify_all();
}

void WorkQueue::stopCompleters(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  completersStop_ = true;
  taskCv_.notify_all();
  const int self = completerOf == this ? 1 : 0;
  bool done = idleCv_.wait_until(lock, deadline, [&] { return liveCompleters_ <= self; });
  std::vector<std::thread> threads = std::move(completers_);
  completers_.clear();
  lock.unlock();
  for (auto& t : threads) {
    if (!t.joinable())
      continue;
    // A completer still in a callback after the deadline, or this thread
    // itself, finishes on its own (it holds a reference to the queue).
    if (done && t.get_id() != std::this_thread::get_id())
      t.join();
    else
      t.detach();
  }
}

} // namespace smddp_torch
