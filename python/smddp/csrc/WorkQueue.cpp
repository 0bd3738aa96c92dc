// WorkQueue.cpp - the work items of an smddp process group and the worker that
// runs them; their completers are in WorkCompleters.cpp (design in WorkQueue.hpp).
#include <Python.h>

#include "WorkQueue.hpp"

#include <c10/util/ScopeExit.h>

#include <algorithm>
#include <cstdio>
#include <system_error>
#include <unordered_map>

#include <ATen/core/ivalue.h>
#include <ATen/core/jit_type.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>
#include <c10/util/thread_name.h>

#ifdef SMDDP_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#endif

#include "Types.hpp"

namespace smddp_torch {

thread_local const WorkQueue* completerOf = nullptr;

namespace {

// The started queues, for stopAllAtExit().
std::mutex liveMutex;
std::vector<std::weak_ptr<WorkQueue>> liveQueues;

// The message of an exception, without the C++ backtrace of c10 errors.
std::string messageOf(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown exception";
  }
}

std::exception_ptr backendError(const std::string& msg) {
  try {
    throwBackendError(msg);
  } catch (...) {
    return std::current_exception();
  }
}

#ifdef SMDDP_TORCH_CUDA
// Streams are made for the groups, not taken from torch's pool (where an
// unrelated group or library could share one and order its work behind
// ours), and never destroyed: the caching allocator records events on a
// stream given to recordStream() whenever the tensor is freed, possibly
// after the group is gone.  A stopped group's streams serve the next group.
std::mutex streamPoolMutex;
std::unordered_map<c10::DeviceIndex, std::vector<cudaStream_t>> streamPool;

c10::cuda::CUDAStream acquireStream(c10::DeviceIndex device) {
  cudaStream_t stream = nullptr;
  {
    std::lock_guard<std::mutex> lock(streamPoolMutex);
    auto& pool = streamPool[device];
    if (!pool.empty()) {
      stream = pool.back();
      pool.pop_back();
    }
  }
  if (!stream) {
    c10::cuda::CUDAGuard guard(device);
    C10_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }
  return c10::cuda::getStreamFromExternal(stream, device);
}

void releaseStream(const c10::cuda::CUDAStream& stream) {
  std::lock_guard<std::mutex> lock(streamPoolMutex);
  streamPool[stream.device_index()].push_back(stream.stream());
}
#endif

} // namespace

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
      body_(std::move(body)) {
  std::vector<c10::Device> devices;
  if (device_.is_cuda())
    devices.push_back(device_);
  future_ = c10::make_intrusive<c10::ivalue::Future>(
      c10::ListType::create(c10::TensorType::get()), std::move(devices));
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
#ifdef SMDDP_TORCH_CUDA
  // The future records its events on the current stream: one that has
  // waited on this work's end event and on nothing later.
  std::optional<c10::cuda::CUDAGuard> deviceGuard;
  std::optional<c10::cuda::CUDAStreamGuard> streamGuard;
  if (!error && doneStream_) {
    deviceGuard.emplace(device_.index());
    streamGuard.emplace(*doneStream_);
  }
#endif
  try {
    if (error)
      future_->setError(error);
    else
      future_->markCompleted(c10::IValue(outputs_));
  } catch (...) {
    // markCompleted checks the value before completing (and a raw callback
    // may throw after): the work fails with that, the future too if it can.
    if (!error)
      error = std::current_exception();
    if (!future_->completed())
      future_->setErrorIfNeeded(error);
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
  return future_;
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

// ---- WorkQueue: enqueue and the worker ---------------------------------------

WorkQueue::WorkQueue(std::shared_ptr<GroupState> state, smddp_comm* comm)
    : state_(std::move(state)), comm_(comm) {}

WorkQueue::~WorkQueue() {
  // stop() has joined or detached the threads (they hold references to
  // this queue, so it outlives them); a queue never started still owns its
  // communicator.
  if (thread_.joinable())
    stop(false);
  freeComm();
}

std::atomic<bool> WorkQueue::inlineAllowed{true};

WorkQueue::CudaPathStats WorkQueue::cudaPathStats() const {
  return {cudaMode_.load(), inlined_.load(), queuedCuda_.load()};
}

void WorkQueue::start() {
  // Known before any call where one rank or SMDDP_CUDA_ASYNC decides it.
  int mode = SMDDP_CUDA_UNDECIDED;
  if (comm_ && smddp_comm_get_cuda_mode(comm_, &mode) == SMDDP_OK)
    cudaMode_.store(mode);
  // The worker owns a reference, so that it can outlive a stop() called
  // on itself.
  thread_ = std::thread([self = shared_from_this()] { self->loop(); });
  std::lock_guard<std::mutex> lock(liveMutex);
  liveQueues.erase(
      std::remove_if(
          liveQueues.begin(), liveQueues.end(), [](const auto& q) { return q.expired(); }),
      liveQueues.end());
  liveQueues.push_back(weak_from_this());
}

void WorkQueue::stopAllAtExit() {
  std::vector<std::shared_ptr<WorkQueue>> queues;
  {
    std::lock_guard<std::mutex> lock(liveMutex);
    for (const auto& w : liveQueues)
      if (auto q = w.lock())
        queues.push_back(std::move(q));
    liveQueues.clear();
  }
  for (const auto& q : queues) {
    bool idle;
    {
      std::lock_guard<std::mutex> lock(q->mutex_);
      idle = q->outstanding_ == 0;
    }
    // Work nobody waited for: the peers must not wait for this rank at
    // their timeout, so they learn that it left (SMDDP_EABORTED).
    if (!idle)
      q->state_->fail(
          "smddp: " + q->state_->who() +
          " exited with work of the group still queued (call "
          "dist.destroy_process_group() after the last wait())");
    q->stop(!idle || q->state_->failed());
  }
}

void WorkQueue::prepare(
    const c10::intrusive_ptr<WorkSMDDP>& work,
    const std::vector<at::Tensor>& deviceTensors) {
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
#ifdef SMDDP_TORCH_CUDA
  if (work->device_.is_cuda()) {
    c10::DeviceIndex device = work->device_.index();
    DeviceStreams streams = streamsFor(device);
    work->stream_ = streams.run;
    work->doneStream_ = streams.done;
    work->startEvent_ = std::make_unique<CudaEvent>();
    work->endEvent_ = std::make_unique<CudaEvent>();
    work->startEvent_->record(c10::cuda::getCurrentCUDAStream(device));
    // The side stream uses memory the caller's stream allocated: the
    // caching allocator must not hand it out again before the side stream
    // is done with it, wait()ed for or not.
    for (const auto& t : deviceTensors)
      c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), streams.run);
  }
#else
  (void)deviceTensors;
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

void WorkQueue::enqueue(
    const c10::intrusive_ptr<WorkSMDDP>& work,
    const std::vector<at::Tensor>& deviceTensors,
    bool mayInline) {
  prepare(work, deviceTensors);
#ifdef SMDDP_TORCH_CUDA
  if (mayInline && work->device_.is_cuda() && inlineAllowed.load(std::memory_order_relaxed) &&
      cudaMode_.load(std::memory_order_relaxed) == SMDDP_CUDA_QUEUED && runInline(work))
    return;
  if (work->device_.is_cuda())
    queuedCuda_.fetch_add(1, std::memory_order_relaxed);
#else
  (void)mayInline;
#endif
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
}

#ifdef SMDDP_TORCH_CUDA
WorkQueue::DeviceStreams WorkQueue::streamsFor(c10::DeviceIndex device) {
  std::lock_guard<std::mutex> lock(streamMutex_);
  for (const auto& s : streams_)
    if (s.device == device)
      return s;
  streams_.push_back({device, acquireStream(device), acquireStream(device)});
  return streams_.back();
}
#endif

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

bool WorkQueue::runInline(const c10::intrusive_ptr<WorkSMDDP>& work) {
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
  work->markStarted();
  const bool wasWatching = watching_.load(std::memory_order_relaxed);
  std::string say;
  std::exception_ptr error = execute(work, false, say);
  commLock.unlock();
  sayDeviceError(say);
  inlined_.fetch_add(1, std::memory_order_relaxed);
  if (!wasWatching && watching_.load(std::memory_order_relaxed)) {
    // The idle worker looks at the GPU every kDevicePoll from now on; the
    // lock orders this wake-up after its look at watching_.
    { std::lock_guard<std::mutex> lock(mutex_); }
    workCv_.notify_one();
  }
  work->body_ = nullptr;
  if (error) {
    std::lock_guard<std::mutex> lock(work->mutex_);
    work->runError_ = error; // as post() does: a coalescing window's end reads it
  }
  // Its future's callbacks run here, on the caller's thread, as
  // ProcessGroupNCCL's do: the work is done as far as the host goes.
  work->complete(error, [] {});
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
      if (onWorker)
        tlsGuard.emplace(work->tls_);
      at::NoGradGuard noGrad;
      work->body_(ctx);
    }
#ifdef SMDDP_TORCH_CUDA
    if (work->endEvent_) {
      work->endEvent_->record(*work->stream_);
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

// ---- WorkQueue: tear-down ------------------------------------------------------------

void WorkQueue::stop(bool abort) {
  stopAndTake(abort, false);
}

smddp_comm* WorkQueue::handOver(bool abort) {
  return stopAndTake(abort, true);
}

smddp_comm* WorkQueue::stopAndTake(bool abort, bool take) {
  GilRelease noGil;
  std::unique_lock<std::mutex> lock(mutex_);
  if (stopRequested_) {
    // An abort while a shutdown waits for the queue: that wait ends, the
    // call in progress is cancelled, and the shutdown finishes as an abort.
    if (abort && !aborting_) {
      state_->fail("smddp: the process group was aborted on " + state_->who());
      aborting_ = true;
      lock.unlock();
      idleCv_.notify_all();
      cancelCall();
    }
    return nullptr;
  }
  stopRequested_ = true;
  handedOver_ = take;
  idleCv_.notify_all(); // a barrier's awaitCompletions
  const bool onWorker = thread_.joinable() && std::this_thread::get_id() == thread_.get_id();
  const int self = completerOf == this ? 1 : 0;
  auto deadline = std::chrono::steady_clock::now() + state_->timeout;

  if (abort) {
    state_->fail("smddp: the process group was aborted on " + state_->who());
    aborting_ = true;
  } else if (thread_.joinable() && !onWorker) {
    // Callbacks of completed work may still queue more (PowerSGD's hook
    // does): wait for all of it.
    if (!idleCv_.wait_until(lock, deadline, [&] {
          return aborting_ ||
              (queue_.empty() && !busy_ && completions_.empty() &&
               runningCompletions_ <= self);
        }))
      state_->fail(
          "smddp: the process group was shut down on " + state_->who() +
          " with work still queued after the group timeout of " +
          std::to_string(state_->timeout.count()) + " ms");
  }
  stopped_ = true;
  stopping_ = true;
  // A call in progress would otherwise hold the join (and abort()) until
  // its SMDDP_TIMEOUT.
  if (abort || state_->failed())
    cancelCall();

  if (onWorker) {
    // It cannot wait for itself: the worker fails or finishes what is
    // queued, then frees the communicator and stops the completers.  (No
    // body calls handOver(): only the caller's thread shrinks.)
    detached_ = true;
    thread_.detach();
    lock.unlock();
    workCv_.notify_all();
    return nullptr;
  }
  lock.unlock();
  workCv_.notify_all();
  if (thread_.joinable())
    thread_.join();
  // Before the communicator goes: a failure of the last GPU work is still
  // told (stderr, the works), and the peers learn of it (abort).
  finishDeviceChecks(
      deadline, state_->timeout,
      take ? "the process group was shrunk" : "the process group was shut down");
  smddp_comm* comm = nullptr;
  if (take) {
    // Handed over whole: neither released nor aborted (a failed group's
    // communicator is what the shrink works on), nor cancelled here once
    // the caller has it.
    std::lock_guard<std::mutex> commLock(commMutex_);
    comm = takeComm();
  }
  freeComm();
  stopCompleters(std::max(deadline, std::chrono::steady_clock::now() + std::chrono::seconds(1)));
  return comm;
}

void WorkQueue::cancelCall() {
  std::lock_guard<std::mutex> lock(cancelMutex_);
  if (comm_)
    smddp_comm_cancel(comm_);
}

smddp_comm* WorkQueue::takeComm() {
  std::lock_guard<std::mutex> lock(cancelMutex_);
  smddp_comm* comm = comm_;
  comm_ = nullptr;
  return comm;
}

void WorkQueue::abortComm() {
  smddp_comm_abort(takeComm());
}

void WorkQueue::freeComm() {
  std::string say;
  std::unique_lock<std::mutex> commLock(commMutex_);
  if (comm_) {
    // smddp_comm_release tells the peers this rank leaves normally; after a
    // failure it aborts (and so does an explicit abort).  Either frees comm.
    // A failure of queued GPU work that the last checks missed is returned
    // by the release: nobody is left to be told but stderr.
    if (aborting_ || state_->failed()) {
      abortComm();
    } else {
      int rc = smddp_comm_release(takeComm());
      if (rc != SMDDP_OK)
        say = "smddp: " + state_->who() + ": work queued on the GPU failed, found when " +
            "releasing the communicator: " + smddp_last_error(nullptr) + " (" +
            smddp_strerror(rc) + ")";
    }
  }
  commLock.unlock();
  sayDeviceError(say);
#ifdef SMDDP_TORCH_CUDA
  std::lock_guard<std::mutex> lock(streamMutex_);
  for (const auto& s : streams_) {
    releaseStream(s.run);
    releaseStream(s.done);
  }
  streams_.clear();
#endif
}

} // namespace smddp_torch
