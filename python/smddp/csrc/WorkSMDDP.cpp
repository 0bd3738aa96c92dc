// WorkSMDDP.cpp - the work items of an smddp process group: what a call's Work
// says and waits for, and the group's shared state (design in WorkQueue.hpp).
#include <Python.h>

#include "WorkQueue.hpp"

#include <c10/util/ScopeExit.h>

#include <algorithm>

#include <ATen/core/ivalue.h>
#include <ATen/core/jit_type.h>
#include <c10/util/Exception.h>

#ifdef SMDDP_TORCH_CUDA
#include <c10/cuda/CUDAGuard.h>
#endif

#include "Types.hpp"

namespace smddp_torch {

// ---- GilRelease ------------------------------------------------------------

GilRelease::GilRelease() {
  if (Py_IsInitialized() && PyGILState_Check())
    saved_ = PyEval_SaveThread();
}

GilRelease::~GilRelease() {
  if (saved_)
    PyEval_RestoreThread(static_cast<PyThreadState*>(saved_));
}

// ---- GroupState ------------------------------------------------------------

std::string GroupState::who() const {
  return "rank " + std::to_string(rank) + " of " + std::to_string(size);
}

void GroupState::fail(const std::string& cause) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failure_.empty())
    failure_ = cause.empty() ? "smddp: unknown failure" : cause;
}

bool GroupState::failed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !failure_.empty();
}

std::string GroupState::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

std::string GroupState::rootCause() const {
  std::string cause = failure();
  const std::string prefix = "smddp: ";
  if (cause.compare(0, prefix.size(), prefix) == 0)
    cause.erase(0, prefix.size());
  return cause;
}

void RunContext::check(int rc, const char* call) {
  if (rc == SMDDP_OK)
    return;
  result = rc;
  // The library's sentence names this rank, the step and the peer.
  std::string detail = smddp_last_error(comm);
  std::string msg = detail.empty()
      ? "smddp: " + std::string(call) + " failed on " + state.who() + ": " + smddp_strerror(rc)
      : "smddp: " + std::string(call) + " failed: " + detail + " (" + smddp_strerror(rc) + ")";
  // The library reports these before any message leaves this rank, and
  // keeps the communicator usable (lib/core/api.c, leave()).
  if (rc == SMDDP_EINVAL || rc == SMDDP_EUNSUPPORTED || rc == SMDDP_EMISMATCH)
    recoverable = true;
  else
    state.fail(msg);
  throwBackendError(msg);
}

// ---- WorkSMDDP ---------------------------------------------------------------

WorkSMDDP::WorkSMDDP(
    std::shared_ptr<GroupState> state,
    c10d::OpType type,
    const char* name,
    at::Device device,
    std::vector<at::Tensor> outputs,
    std::chrono::milliseconds timeout,
    uint64_t seq,
    Body body)
    : c10d::Work(state->rank, type),
      state_(std::move(state)),
      name_(name),
      device_(device),
      outputs_(std::move(outputs)),
      timeout_(timeout),
      seq_(seq),
      body_(std::move(body)) {}

c10::intrusive_ptr<c10::ivalue::Future> WorkSMDDP::newFuture() const {
  std::vector<c10::Device> devices;
  if (device_.is_cuda())
    devices.push_back(device_);
  return c10::make_intrusive<c10::ivalue::Future>(
      c10::ListType::create(c10::TensorType::get()), std::move(devices));
}

void WorkSMDDP::makeFuture() {
  auto future = newFuture();
  std::lock_guard<std::mutex> lock(mutex_);
  future_ = std::move(future);
}

WorkSMDDP::~WorkSMDDP() {
#ifdef SMDDP_TSAN
  __tsan_acquire(countAddress()); // see TsanUse
#endif
}

void WorkSMDDP::markStarted() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    started_ = std::chrono::steady_clock::now();
  }
  cv_.notify_all();
}

void WorkSMDDP::markVerified() {
  WorkSMDDP::TsanUse use(this);
  std::lock_guard<std::mutex> lock(mutex_);
  verified_ = true;
}

void WorkSMDDP::failDevice(std::exception_ptr error) {
  WorkSMDDP::TsanUse use(this);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (exception_ || deviceError_)
      return;
    deviceError_ = std::move(error);
  }
  cv_.notify_all();
}

void WorkSMDDP::checkDeviceIfDone() {
#ifdef SMDDP_TORCH_CUDA
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // The end event is recorded before the work completes.
    if (!completed_ || exception_ || deviceError_ || verified_ || !endEvent_)
      return;
  }
  if (!endEvent_->query())
    return;
  if (auto queue = owner_.lock())
    queue->checkDevice(false);
#endif
}

void WorkSMDDP::complete(std::exception_ptr error, const std::function<void()>& beforeFinish) {
  WorkSMDDP::TsanUse use(this);
  if (!error) {
    // The device check may have failed it while its completion was queued.
    std::lock_guard<std::mutex> lock(mutex_);
    error = deviceError_;
  }
  c10::intrusive_ptr<c10::ivalue::Future> future;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    future = future_;
  }
  if (!future) {
    // Nobody can ask for it now (getFuture() makes one completed).
    beforeFinish();
    finish(error);
    return;
  }
#ifdef SMDDP_TORCH_CUDA
  // The future records its events on the current stream: one that has
  // waited on this work's end event and on nothing later (the done stream
  // on the worker; inline, the stream that ran it, before anything later).
  std::optional<c10::cuda::CUDAGuard> deviceGuard;
  std::optional<c10::cuda::CUDAStreamGuard> streamGuard;
  if (!error && (doneStream_ || stream_)) {
    deviceGuard.emplace(device_.index());
    streamGuard.emplace(doneStream_ ? *doneStream_ : *stream_);
  }
#endif
  try {
    if (error)
      future->setError(error);
    else
      future->markCompleted(c10::IValue(outputs_));
  } catch (...) {
    // markCompleted checks the value before completing (and a raw callback
    // may throw after): the work fails with that, the future too if it can.
    if (!error)
      error = std::current_exception();
    if (!future->completed())
      future->setErrorIfNeeded(error);
  }
  beforeFinish();
  finish(error);
}

bool WorkSMDDP::isCompleted() {
  WorkSMDDP::TsanUse use(this);
  checkDeviceIfDone();
  std::lock_guard<std::mutex> lock(mutex_);
  if (!completed_)
    return false;
#ifdef SMDDP_TORCH_CUDA
  // Done on the GPU is not yet done: the communicator may have failed it.
  if (!exception_ && !deviceError_ && endEvent_)
    return verified_;
#endif
  return true;
}

bool WorkSMDDP::isSuccess() const {
  WorkSMDDP::TsanUse use(this);
  std::lock_guard<std::mutex> lock(mutex_);
  return !exception_ && !deviceError_;
}

std::exception_ptr WorkSMDDP::runError() const {
  WorkSMDDP::TsanUse use(this);
  std::lock_guard<std::mutex> lock(mutex_);
  return runError_;
}

std::exception_ptr WorkSMDDP::exception() const {
  WorkSMDDP::TsanUse use(this);
  std::lock_guard<std::mutex> lock(mutex_);
  return exception_ ? exception_ : deviceError_;
}

bool WorkSMDDP::wait(std::chrono::milliseconds timeout) {
  WorkSMDDP::TsanUse use(this);
  // On a completer of this work's queue, for a work not yet started (a
  // barrier running, or one after it): a callback waiting for a later
  // work, which a barrier between them must not wait for in turn.
  std::shared_ptr<WorkQueue> queue = owner_.lock();
  bool later;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    later = !started_ && !completed_;
  }
  if (!queue || completerOf != queue.get() || !later)
    queue.reset();
  if (queue)
    queue->completerWaits(1);
  auto unmark = c10::make_scope_exit([&] {
    if (queue)
      queue->completerWaits(-1);
  });
  std::unique_lock<std::mutex> lock(mutex_);
  if (timeout != kNoTimeout) {
    if (!cv_.wait_for(lock, timeout, [&] { return completed_; })) {
      lock.unlock();
      throwBackendError(
          "smddp: " + std::string(name_) + " (operation " + std::to_string(seq_) + ") on " +
          state_->who() + " did not complete within the " + std::to_string(timeout.count()) +
          " ms given to wait()");
    }
  } else {
    // The group timeout, from when the worker started this work: what
    // waits before that is earlier work, bounded by its own deadline.  The
    // library's waits have the same deadline, and its sentence says more
    // (which ranks did not arrive), so it gets a moment to come first.
    auto grace = std::min<std::chrono::milliseconds>(timeout_ / 4, std::chrono::seconds(5));
    while (!completed_) {
      if (!started_) {
        cv_.wait(lock);
        continue;
      }
      auto deadline = *started_ + timeout_ + grace;
      if (cv_.wait_until(lock, deadline, [&] { return completed_; }))
        break;
      lock.unlock();
      std::string msg = "smddp: " + std::string(name_) + " (operation " + std::to_string(seq_) +
          ") on " + state_->who() + " did not complete within the process group timeout of " +
          std::to_string(timeout_.count()) +
          " ms; the group cannot be used any more (a peer may be stuck or have "
          "stopped calling collectives)";
      state_->fail(msg);
      throwBackendError(msg);
    }
  }
  lock.unlock();
  // A work the GPU is done with is checked now, so that its failure is
  // raised here; one the GPU is still on fails later (exception(), the
  // next call).
  checkDeviceIfDone();
  lock.lock();
  std::exception_ptr error = exception_ ? exception_ : deviceError_;
  lock.unlock();
  if (error)
    std::rethrow_exception(error);
  blockCurrentStreamOnEnd();
  return true;
}

void WorkSMDDP::synchronize() {
  WorkSMDDP::TsanUse use(this);
  checkDeviceIfDone();
  std::unique_lock<std::mutex> lock(mutex_);
  bool ok = completed_ && !exception_ && !deviceError_;
  lock.unlock();
  if (ok)
    blockCurrentStreamOnEnd();
}

void WorkSMDDP::blockCurrentStreamOnEnd() {
#ifdef SMDDP_TORCH_CUDA
  if (device_.is_cuda() && endEvent_)
    endEvent_->block(c10::cuda::getCurrentCUDAStream(device_.index()));
#endif
}

std::vector<at::Tensor> WorkSMDDP::result() {
  WorkSMDDP::TsanUse use(this);
  return outputs_;
}

c10::intrusive_ptr<c10::ivalue::Future> WorkSMDDP::getFuture() {
  WorkSMDDP::TsanUse use(this);
  std::lock_guard<std::mutex> lock(mutex_);
  if (future_)
    return future_;
  // Made on demand: a host work not run yet gets one that its completion
  // completes; one complete already (or sealed by the worker), or a CUDA
  // work run on the caller's current stream, gets one complete now, on the
  // stream that ran it.  No callback can be chained on it yet, so no user
  // code runs under the lock.
  future_ = newFuture();
  if (!completed_ && !sealed_)
    return future_;
  std::exception_ptr error =
      sealed_ ? sealedError_ : (exception_ ? exception_ : deviceError_);
  if (error) {
    future_->setError(error);
    return future_;
  }
#ifdef SMDDP_TORCH_CUDA
  std::optional<c10::cuda::CUDAGuard> deviceGuard;
  std::optional<c10::cuda::CUDAStreamGuard> streamGuard;
  if (stream_) {
    deviceGuard.emplace(device_.index());
    streamGuard.emplace(*stream_);
  }
#endif
  future_->markCompleted(c10::IValue(outputs_));
  return future_;
}

bool WorkSMDDP::completeWithoutFuture(
    std::exception_ptr error,
    const std::function<void()>& beforeFinish) {
  WorkSMDDP::TsanUse use(this);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (future_)
      return false;
    if (!error)
      error = deviceError_;
    if (error)
      runError_ = error; // as post() does: a coalescing window's end reads it
    sealed_ = true;
    sealedError_ = error;
  }
  beforeFinish();
  finish(error);
  return true;
}

uint64_t WorkSMDDP::getSequencenumber() const {
  return seq_;
}

std::chrono::milliseconds WorkSMDDP::getTimeout() const {
  return timeout_;
}

int WorkSMDDP::sourceRank() const {
  WorkSMDDP::TsanUse use(this);
  int source = source_.load();
  TORCH_CHECK(
      source >= 0,
      "smddp: sourceRank() of ",
      name_,
      ": only a completed receive has a source rank");
  return source;
}

} // namespace smddp_torch
