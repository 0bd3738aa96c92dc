// WorkQueue.cpp - how a call's work runs: queued for the group's worker thread,
// or on the caller's thread (the inline path); the life of the queue is in
// WorkQueueLife.cpp, the device check in WorkDeviceCheck.cpp, the completers in
// WorkCompleters.cpp (design in WorkQueue.hpp).
#include "WorkQueue.hpp"

#include <ATen/ThreadLocalState.h>
#include <c10/core/GradMode.h>
#include <c10/util/thread_name.h>

#ifdef SMDDP_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#endif

#include "Types.hpp"

namespace smddp_torch {

// ---- WorkQueue: enqueue and the worker ---------------------------------------

std::atomic<bool> WorkQueue::inlineAllowed{true};

WorkQueue::CudaPathStats WorkQueue::cudaPathStats() const {
  return {cudaMode_.load(), inlined_.load(), queuedCuda_.load()};
}

void WorkQueue::prepare(
    const c10::intrusive_ptr<WorkSMDDP>& work,
    const std::vector<at::Tensor>& deviceTensors) {
  admit(work);
  place(work, deviceTensors, Placement::Worker);
}

void WorkQueue::admit(const c10::intrusive_ptr<WorkSMDDP>& work) {
  // A shrunk group says so first: it failed too, most often, but the
  // group to use now is the one shrink_group returned.
  if (handedOver_.load())
    throwStopped(*work);
  if (state_->failed())
    throwBackendError(
        "smddp: " + std::string(work->name_) + " on " + state_->who() +
        ": this process group failed earlier and cannot be used any more (destroy "
        "it and create a new one); the root cause: " +
        state_->rootCause());
  bool stopped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopped = stopped_;
  }
  if (stopped)
    throwStopped(*work);
  work->owner_ = weak_from_this();
}

void WorkQueue::place(
    const c10::intrusive_ptr<WorkSMDDP>& work,
    const std::vector<at::Tensor>& deviceTensors,
    Placement where) {
#ifdef SMDDP_TORCH_CUDA
  if (work->device_.is_cuda()) {
    c10::DeviceIndex device = work->device_.index();
    work->endEvent_ = takeEvent(device);
    if (where == Placement::InlineCurrent) {
      // Ordered by the stream itself, and its tensors are used on it, as
      // any kernel the caller queues there.
      work->stream_ = c10::cuda::getCurrentCUDAStream(device);
      return;
    }
    DeviceStreams streams = streamsFor(device);
    work->stream_ = streams.run;
    if (where == Placement::Worker)
      work->doneStream_ = streams.done;
    work->startEvent_ = takeEvent(device);
    work->startEvent_->record(c10::cuda::getCurrentCUDAStream(device));
    // The side stream uses memory the caller's stream allocated: the
    // caching allocator must not hand it out again before the side stream
    // is done with it, wait()ed for or not.
    for (const auto& t : deviceTensors)
      c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), streams.run);
    // Its future's events must stand for this work's end: made now, so
    // that they go on the done stream in order (or inline, on the side
    // stream before anything later).  A host work's is made when asked.
    work->makeFuture();
  }
#else
  (void)deviceTensors;
  (void)where;
#endif
}

void WorkQueue::throwStopped(const WorkSMDDP& work) const {
  if (handedOver_.load())
    throwBackendError(
        "smddp: " + std::string(work.name_) + " on " + state_->who() +
        ": the process group was shrunk (dist.shrink_group) and runs no more calls; "
        "use the group that shrink_group returned");
  throwBackendError(
      "smddp: " + std::string(work.name_) + " on " + state_->who() +
      ": the process group was shut down or aborted and runs no more calls; make a new "
      "one (dist.new_group, or init_process_group after destroy_process_group)");
}

bool WorkQueue::enqueue(
    const c10::intrusive_ptr<WorkSMDDP>& work,
    const std::vector<at::Tensor>& deviceTensors,
    bool mayInline,
    bool sync) {
  admit(work);
#ifdef SMDDP_TORCH_CUDA
  if (work->device_.is_cuda()) {
    if (mayInline && inlineAllowed.load(std::memory_order_relaxed) &&
        cudaMode_.load(std::memory_order_relaxed) == SMDDP_CUDA_QUEUED &&
        runInline(work, deviceTensors, sync))
      return sync;
    queuedCuda_.fetch_add(1, std::memory_order_relaxed);
  }
#else
  (void)mayInline;
  (void)sync;
#endif
  place(work, deviceTensors, Placement::Worker);
  work->tls_.emplace(); // the worker runs it under this thread's state
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (stopped_) {
      lock.unlock();
      throwStopped(*work);
    }
    queue_.push_back(work);
    outstanding_ += 1 + static_cast<int64_t>(work->members_.size());
  }
  workCv_.notify_one();
  return false;
}

void WorkQueue::loop() {
  c10::setThreadName("pt_smddp_work");
  for (;;) {
    c10::intrusive_ptr<WorkSMDDP> work;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      busy_ = false;
      idleCv_.notify_all();
      while (queue_.empty() && !stopping_) {
        if (!watching_.load(std::memory_order_relaxed)) {
          workCv_.wait(lock);
          continue;
        }
        // CUDA work may still fail on the GPU, and nobody may call us
        // again to learn of it: look every kDevicePoll.
        workCv_.wait_for(lock, kDevicePoll);
        if (!queue_.empty() || stopping_)
          break;
        lock.unlock();
        checkDevice(true);
        lock.lock();
      }
      if (queue_.empty())
        break;
      work = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    run(work);
  }
  bool detached;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    detached = detached_;
  }
  if (detached) {
    finishDeviceChecks(
        std::chrono::steady_clock::now() + state_->timeout, state_->timeout,
        "the process group was shut down");
    freeComm();
    stopCompleters(std::chrono::steady_clock::now() + state_->timeout);
  }
}

void WorkQueue::run(const c10::intrusive_ptr<WorkSMDDP>& work) {
  WorkSMDDP::TsanUse use(work.get());
  // NCCL's barrier ends when this rank's collectives queued before it are
  // done on the GPU (and say so); scripts time steps and save checkpoints
  // after it.
  // Looked at every millisecond (a step's time), before the barrier's
  // own timeout starts; if the wait fails the group, the peers, already
  // in the barrier, are told now.
  if (work->retrieveOpType() == c10d::OpType::BARRIER && !state_->failed()) {
    const auto deadline = std::chrono::steady_clock::now() + work->getTimeout();
    finishDeviceChecks(deadline, work->getTimeout(), "barrier", std::chrono::milliseconds(1));
    if (state_->failed()) {
      std::lock_guard<std::mutex> commLock(commMutex_);
      abortComm();
    }
    awaitCompletions(deadline);
  }
  work->markStarted();
  for (const auto& m : work->members_)
    m->markStarted();
  std::unique_lock<std::mutex> commLock(commMutex_);
  std::string say;
  std::exception_ptr error = execute(work, true, say);
  commLock.unlock();
  sayDeviceError(say);
  work->body_ = nullptr; // frees the staging buffers now
  for (const auto& m : work->members_)
    post(m, error);
  work->members_.clear();
  post(work, error);
}

bool WorkQueue::runInline(
    const c10::intrusive_ptr<WorkSMDDP>& work,
    const std::vector<at::Tensor>& deviceTensors,
    bool sync) {
  WorkSMDDP::TsanUse use(work.get());
  // Never waits for the worker: a body it runs may free a tensor that
  // needs the GIL, which this thread may hold.  Busy, it takes the work.
  std::unique_lock<std::mutex> commLock(commMutex_, std::try_to_lock);
  if (!commLock.owns_lock())
    return false;
  {
    // Work queued before this one runs first: issue order is what keeps
    // the ranks matched.
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopped_ || busy_ || !queue_.empty())
      return false;
  }
  place(work, deviceTensors, sync ? Placement::InlineCurrent : Placement::InlineSide);
  work->markStarted();
  const bool wasWatching = watching_.load(std::memory_order_relaxed);
  std::string say;
  std::exception_ptr error = execute(work, false, say);
  work->body_ = nullptr;
  if (error) {
    std::lock_guard<std::mutex> lock(work->mutex_);
    work->runError_ = error; // as post() does: a coalescing window's end reads it
  }
  // Done as far as the host goes, and not handed out yet: no callback is
  // chained on its future, and nothing later is on its stream, which the
  // future's events stand for (so no done stream).  Completed before the
  // communicator is free for the next call, which may queue on that stream.
  work->complete(error, [] {});
  commLock.unlock();
  sayDeviceError(say);
  inlined_.fetch_add(1, std::memory_order_relaxed);
  if (!wasWatching && watching_.load(std::memory_order_relaxed)) {
    // The idle worker looks at the GPU every kDevicePoll from now on; the
    // lock orders this wake-up after its look at watching_.
    { std::lock_guard<std::mutex> lock(mutex_); }
    workCv_.notify_one();
  }
  return true;
}

std::exception_ptr WorkQueue::execute(
    const c10::intrusive_ptr<WorkSMDDP>& work,
    bool onWorker,
    std::string& say) {
  // A failure of queued CUDA work is named as such, not as this call's.
  checkDeviceLocked(say);
  if (state_->failed() || !comm_)
    return backendError(
        "smddp: " + std::string(work->name_) + " on " + state_->who() +
        " was not run: this process group failed earlier and cannot be used any "
        "more; the root cause: " +
        state_->rootCause());

  void* stream = nullptr;
#ifdef SMDDP_TORCH_CUDA
  std::optional<c10::cuda::CUDAGuard> deviceGuard;
  std::optional<c10::cuda::CUDAStreamGuard> streamGuard;
  if (work->device_.is_cuda()) {
    deviceGuard.emplace(work->device_.index());
    if (work->startEvent_)
      work->startEvent_->block(*work->stream_);
    for (const auto& m : work->members_)
      m->startEvent_->block(*work->stream_);
    // Staging copies and PREMUL_SUM scaling are queued on the side stream
    // too.
    streamGuard.emplace(*work->stream_);
    stream = work->stream_->stream();
  }
#endif
  RunContext ctx(comm_, stream, *state_, work.get());
  std::exception_ptr error;
  try {
    {
      // On the worker, the caller's thread-local state (profiler, dispatch
      // keys); without autograd: the copies in and out of staging buffers
      // are not part of any graph, and may write leaf tensors that require
      // grad.
      std::optional<at::ThreadLocalStateGuard> tlsGuard;
      if (onWorker && work->tls_)
        tlsGuard.emplace(*work->tls_);
      at::NoGradGuard noGrad;
      work->body_(ctx);
    }
#ifdef SMDDP_TORCH_CUDA
    if (work->endEvent_) {
      work->endEvent_->record(*work->stream_);
      if (work->doneStream_)
        work->endEvent_->block(*work->doneStream_);
      for (const auto& m : work->members_) {
        m->endEvent_->record(*work->stream_);
        m->endEvent_->block(*m->doneStream_);
      }
      // Listed before they complete: a completed CUDA work is either
      // listed, checked or failed.
      for (const auto& m : work->members_)
        unverified_.push_back(m);
      unverified_.push_back(work);
      watching_.store(true, std::memory_order_relaxed);
    }
#endif
  } catch (...) {
    error = std::current_exception();
    if (!ctx.recoverable && !state_->failed()) {
      // The shim failed around the library call (out of memory for a
      // staging buffer...): this rank is out of step with its peers.
      // Aborting tells them now rather than at their timeout.
      state_->fail(
          "smddp: " + std::string(work->name_) + " failed on " + state_->who() + ": " +
          messageOf(error));
      abortComm();
    }
    if (ctx.result == SMDDP_EMISMATCH && comm_ && !state_->failed() && !unverified_.empty()) {
      // A mismatch its proxy met in queued GPU work breaks the
      // communicator and comes back from the next call: it may be the
      // listed works' and not this call's, which cannot be told apart.
      std::string detail = smddp_last_error(comm_);
      failDeviceWork(
          (detail.empty() ? "" : detail + " ") + "(" + smddp_strerror(ctx.result) +
              ", returned by " + work->name_ + " (operation " + std::to_string(work->seq_) + "))",
          say);
    }
    // The listed works too, if the group failed.
    checkDeviceLocked(say);
  }
  // SMDDP_CUDA_ASYNC=auto decides at the first device collective.
  if (work->device_.is_cuda() && comm_ &&
      cudaMode_.load(std::memory_order_relaxed) == SMDDP_CUDA_UNDECIDED) {
    int mode = SMDDP_CUDA_UNDECIDED;
    if (smddp_comm_get_cuda_mode(comm_, &mode) == SMDDP_OK)
      cudaMode_.store(mode, std::memory_order_relaxed);
  }
  return error;
}

} // namespace smddp_torch
