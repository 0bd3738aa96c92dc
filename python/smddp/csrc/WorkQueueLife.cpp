// WorkQueueLife.cpp - the life of a WorkQueue: its start, its streams and events, and
// the ways it ends (stop, abort, hand-over to a shrink, interpreter exit), with
// its communicator (design in WorkQueue.hpp).
#include "WorkQueue.hpp"

#include <algorithm>
#include <unordered_map>

#ifdef SMDDP_TORCH_CUDA
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#endif

#include "Types.hpp"

namespace smddp_torch {

namespace {

// The started queues, for stopAllAtExit().
std::mutex liveMutex;
std::vector<std::weak_ptr<WorkQueue>> liveQueues;

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

// The events the works give back, per device.  Never freed: a work may be
// freed during the interpreter's shutdown, after CUDA's.  The cap bounds
// what a burst of outstanding works leaves behind.
constexpr size_t kEventPoolCap = 1024;
std::mutex eventPoolMutex;
auto* eventPool = new std::unordered_map<c10::DeviceIndex, std::vector<CudaEvent*>>();
#endif

} // namespace

#ifdef SMDDP_TORCH_CUDA
PooledEvent takeEvent(c10::DeviceIndex device) {
  {
    std::lock_guard<std::mutex> lock(eventPoolMutex);
    auto& pool = (*eventPool)[device];
    if (!pool.empty()) {
      CudaEvent* event = pool.back();
      pool.pop_back();
      return PooledEvent(event);
    }
  }
  return PooledEvent(new CudaEvent()); // created at its first record
}

void EventReturn::operator()(CudaEvent* event) const {
  if (event && event->isCreated()) {
    std::lock_guard<std::mutex> lock(eventPoolMutex);
    auto& pool = (*eventPool)[event->device_index()];
    if (pool.size() < kEventPoolCap) {
      pool.push_back(event);
      return;
    }
  }
  delete event;
}
#endif

// ---- WorkQueue: start -----------------------------------------------------------------

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
