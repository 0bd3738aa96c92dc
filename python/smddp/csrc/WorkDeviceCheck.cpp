// WorkDeviceCheck.cpp - the device check of a WorkQueue: whether CUDA work that
// completed on the host also ended well on the GPU (design in WorkQueue.hpp).
#include "WorkQueue.hpp"

#include <algorithm>
#include <cstdio>

#include "Types.hpp"

namespace smddp_torch {

// ---- WorkQueue: the device check -----------------------------------------------------

void WorkQueue::checkDevice(bool wait) {
  std::string say;
  {
    std::unique_lock<std::mutex> lock(commMutex_, std::defer_lock);
    if (wait)
      lock.lock();
    else if (!lock.try_lock())
      return;
    checkDeviceLocked(say);
  }
  sayDeviceError(say);
}

void WorkQueue::sayDeviceError(const std::string& line) {
  // Maybe nobody calls again to be told: said once, as NCCL's watchdog
  // does, and not under commMutex_ (stderr may be a pipe that blocks).
  if (!line.empty())
    std::fprintf(stderr, "%s\n", line.c_str());
}

void WorkQueue::checkDeviceLocked(std::string& say) {
  if (unverified_.empty())
    return;
  if (state_->failed() || !comm_) {
    failUnverified();
    return;
  }
  std::string cudaError; // why the end events cannot be trusted
  // The end events first: a call the event follows released the stream,
  // and the library records a failure before it does.
  size_t done = 0;
#ifdef SMDDP_TORCH_CUDA
  try {
    while (done < unverified_.size()) {
      WorkSMDDP::TsanUse use(unverified_[done].get());
      if (!unverified_[done]->endEvent_->query())
        break;
      ++done;
    }
  } catch (...) {
    // A CUDA error (a sticky one breaks the context): nothing queued can
    // be trusted, and this may run on the worker, which must not throw.
    cudaError = "CUDA cannot tell whether it ended: " + messageOf(std::current_exception());
  }
#endif
  if (cudaError.empty()) {
    int async = SMDDP_OK;
    if (smddp_comm_get_async_error(comm_, &async) != SMDDP_OK)
      async = SMDDP_EINTERNAL; // only for a NULL argument: cannot happen
    if (async == SMDDP_OK) {
      for (; done > 0; --done) {
        unverified_.front()->markVerified();
        unverified_.pop_front();
      }
      watching_.store(!unverified_.empty(), std::memory_order_relaxed);
      return;
    }
    // Which call failed is in the library's sentence; the shim knows
    // which of its works were outstanding.
    std::string detail = smddp_last_error(comm_);
    failDeviceWork(
        detail.empty() ? std::string(smddp_strerror(async))
                       : detail + " (" + smddp_strerror(async) + ")",
        say);
    return;
  }
  failDeviceWork(cudaError, say);
}

void WorkQueue::failDeviceWork(const std::string& why, std::string& say) {
  const WorkSMDDP& first = *unverified_.front();
  std::string line = "smddp: " + state_->who() + ": work queued on the GPU failed: " +
      first.name_ + " (operation " + std::to_string(first.seq_) + ")" +
      (unverified_.size() > 1 ? " or later work" : "") + ": " + why;
  state_->fail(line);
  if (!deviceErrorSaid_) {
    deviceErrorSaid_ = true;
    say = line;
  }
  failUnverified();
}

void WorkQueue::failUnverified() {
  std::deque<c10::intrusive_ptr<WorkSMDDP>> works = std::move(unverified_);
  unverified_.clear();
  watching_.store(false, std::memory_order_relaxed);
  for (const auto& w : works)
    w->failDevice(backendError(
        "smddp: " + std::string(w->name_) + " (operation " + std::to_string(w->seq_) + ") on " +
        state_->who() + ": its output is undefined: the process group failed while it was " +
        "queued on the GPU; the root cause: " + state_->rootCause()));
}

void WorkQueue::finishDeviceChecks(
    std::chrono::steady_clock::time_point deadline,
    std::chrono::milliseconds timeout,
    const std::string& what,
    std::chrono::milliseconds maxPause) {
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    std::string say;
    bool left;
    {
      std::lock_guard<std::mutex> lock(commMutex_);
      checkDeviceLocked(say);
      if (!unverified_.empty() && std::chrono::steady_clock::now() >= deadline) {
        state_->fail(
            "smddp: " + what + " on " + state_->who() +
            ": work queued on the GPU was not done after the timeout of " +
            std::to_string(timeout.count()) + " ms");
        failUnverified();
      }
      left = !unverified_.empty();
    }
    sayDeviceError(say);
    if (!left)
      return;
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::milliseconds>(pause * 2, maxPause);
  }
}

} // namespace smddp_torch
