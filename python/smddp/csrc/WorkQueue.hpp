// WorkQueue.hpp - the work items of an smddp process group and the threads
// that run and complete them.
//
// The training thread never waits on the network: each collective call
// checks its arguments, wraps the library call in a WorkSMDDP and queues it.
// One worker thread per process group runs the items in issue order (the
// order every rank issues them in, which is what the library needs), one
// library call at a time (a communicator is used by one thread at a time).
//
// The worker never runs user code.  Completing a work's future runs the
// callbacks chained on it (then(), DDP communication hooks) inline, and a
// callback may wait for a collective it issues itself (PowerSGD does), which
// only the worker can run.  So completions go to completer threads: a
// completion that finds every completer busy (blocked in a callback) starts
// another one.  A work's Work::wait() returns once its future is complete.
// A host work's future is made only when asked for (getFuture): one that
// has none when it ends is completed by the worker itself, a thread's
// wake-up less per call, since no callback can be chained on it (a future
// asked for later is made complete).
//
// Failure is sticky: the first error that leaves this rank out of step with
// its peers (any library error but EINVAL, EUNSUPPORTED and EMISMATCH, which
// libsmddp reports before touching the peers, or a shim error on the worker)
// becomes the group's root cause, and every later call fails at once with
// it.  A shim error also aborts the communicator, so that the peers learn at
// once instead of at their timeout.
//
// CUDA collectives whose library calls return once queued (allreduce,
// allgather, reduce_scatter, broadcast, reduce and their list forms) skip
// the worker when the communicator is in the queued mode
// (smddp_comm_get_cuda_mode: SMDDP_CUDA_ASYNC, MPS or a GPU per rank): the
// caller's thread runs the body itself, as ProcessGroupNCCL issues its
// calls, if nothing is queued or running on the worker (issue order) and
// commMutex_ is free (never waiting for it: the worker may need the GIL
// that the caller holds); else the work is queued as any other.  The body,
// the events, the device check and the error handling are the worker's
// (execute()); the work completes before the call returns, its future's
// callbacks running on the caller's thread.  A call that torch does not
// hand back (async_op=False: AllreduceOptions::asyncOp and the like; from
// torch 2.8, single-tensor collectives: syncOf) runs
// there on the caller's current stream, as ProcessGroupNCCL does: no
// events between streams, no recordStream, no future, and no Work for
// torch to wait() on; its end event is still recorded for the device
// check.  The blocking mode (ranks
// time-sliced on one GPU without MPS), host tensors, sends and receives,
// and calls that return once done (alltoallv, gather, scatter) keep the
// worker, whose hand-off costs tens of microseconds, not the call's time.
//
// CUDA work (SMDDP_TORCH_CUDA) is stream-ordered as in ProcessGroupNCCL: an
// event recorded on the caller's current stream at enqueue; a side stream of
// the group that waits on it and that the library call (and any staging
// copy) is queued on; an end event recorded after the call.  Work::wait()
// makes the caller's current stream wait on the end event once the worker
// has recorded it.  The future is completed from a second stream of the
// group that only ever waits on end events, so the events it records stand
// for this work's end and not for later work on the side stream.  A work
// run on the caller's thread completes before anything later can be queued
// there, so its future's events go on the side stream itself.  Events come
// from a pool and go back to it when the work is freed (creating and
// destroying them cost driver time on every call).
//
// With SMDDP_CUDA_ASYNC a device call returns once queued, and a failure of
// the collective (a dead peer...) is only recorded on the communicator, for
// smddp_comm_get_async_error() and the next call: the work was completed
// with success by then.  So a CUDA work is done only once its end event is
// done and the communicator then had no async error (the library records a
// failure before it releases the stream, so the error of any call the event
// follows is seen by then).  The works not checked yet are listed
// (unverified_); a check queries their end events, then the communicator,
// holding commMutex_ as the worker does around its library calls (the list
// is the worker's too; the library keeps the query's sentence for the
// querying thread, but a broken communicator's is its last error).  It
// runs on the worker before each item and every kDevicePoll (100 ms) while
// it is idle with works listed, in isCompleted() and wait() when it would
// tell them something (never waiting: skipped while the worker is in a
// library call, which then returns the error itself), and at stop().  An async
// error fails the group with the library's sentence, fails every listed
// work (we cannot tell which of them the failure spoiled, as with NCCL) and
// is said once on stderr.  A check only sets flags: no user code runs on
// it.  Host work is never listed, so CPU groups never poll.
//
// A script that ends without destroy_process_group() leaves the threads
// running into interpreter shutdown, where a thread that frees the last
// reference to a Python-owned tensor dies in PyEval_AcquireThread and takes
// the process down with SIGABRT (gloo's worker does this too).  So every
// started queue is listed, and smddp.torch stops the listed ones at exit.
//
// Sends and receives issued between startCoalescing and endCoalescing
// (batch_isend_irecv) run as one item, the batch, whose body puts them
// between smddp_group_start and smddp_group_end.  Each of them still has a
// work of its own, a member of the batch: never queued, it starts and
// completes with the batch.
#pragma once

#include <atomic>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/ThreadLocalState.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <smddp/smddp.h>

#ifdef SMDDP_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#if __has_include(<c10/cuda/CUDAEvent.h>)
#include <c10/cuda/CUDAEvent.h>
namespace smddp_torch {
using CudaEvent = c10::cuda::CUDAEvent;
}
#else
#include <ATen/cuda/CUDAEvent.h>
namespace smddp_torch {
using CudaEvent = at::cuda::CUDAEvent;
}
#endif
#endif

#if defined(__SANITIZE_THREAD__)
#define SMDDP_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SMDDP_TSAN 1
#endif
#endif
#ifdef SMDDP_TSAN
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace smddp_torch {

#ifdef SMDDP_TORCH_CUDA
// A CUDA event of the pool (WorkQueueLife.cpp): given back, not destroyed,
// when its owner is freed.  A later record of it does not disturb the waits
// queued on its earlier records.
struct EventReturn {
  void operator()(CudaEvent* event) const;
};
using PooledEvent = std::unique_ptr<CudaEvent, EventReturn>;
PooledEvent takeEvent(c10::DeviceIndex device);
#endif

// Releases the GIL, if this thread holds it, for as long as it lives: the
// completers may need it (Python callbacks chained on a work's future), so
// nothing may wait for them, or for the peers, while holding it.
class GilRelease {
 public:
  GilRelease();
  ~GilRelease();
  GilRelease(const GilRelease&) = delete;
  GilRelease& operator=(const GilRelease&) = delete;

 private:
  void* saved_ = nullptr; // the PyThreadState
};

// What the work items of one group share: who this rank is, the group
// timeout, and the root cause once the group failed.
class GroupState {
 public:
  GroupState(int rank, int size, std::chrono::milliseconds timeout)
      : rank(rank), size(size), timeout(timeout) {}

  const int rank;
  const int size;
  const std::chrono::milliseconds timeout;

  // "rank 1 of 4"
  std::string who() const;

  // Records cause as the group's failure unless one is recorded already.
  void fail(const std::string& cause);
  bool failed() const;
  // The recorded cause, "" while the group is healthy.
  std::string failure() const;
  // The same without its leading "smddp: ", to quote in later errors.
  std::string rootCause() const;

 private:
  mutable std::mutex mutex_;
  std::string failure_;
};

class WorkSMDDP;

// What the body of a work item runs with, on the worker thread.
class RunContext {
 public:
  RunContext(smddp_comm* comm, void* stream, GroupState& state, WorkSMDDP* work)
      : comm(comm), stream(stream), state(state), work(work) {}

  smddp_comm* const comm;
  void* const stream; // the cudaStream_t of device work, NULL for host work
  GroupState& state;
  WorkSMDDP* const work; // the work being run

  // Throws c10::DistBackendError when rc is not SMDDP_OK, with the library's
  // sentence (smddp_last_error), and fails the group unless the library
  // says the communicator is still usable.
  void check(int rc, const char* call);

  // Set by check() when it throws for an error that left the communicator
  // usable.
  bool recoverable = false;
  // The library's result check() threw for, SMDDP_OK if none.
  int result = SMDDP_OK;
  // The library function that failed, where a body names it (a batch of
  // sends and receives) rather than the caller of check().
  const char* call = nullptr;
};

class WorkQueue;

// The queue whose completer this thread is, if any (WorkCompleters.cpp).
extern thread_local const WorkQueue* completerOf;

class WorkSMDDP : public c10d::Work {
 public:
  using Body = std::function<void(RunContext&)>;

  // outputs: what result() and the future hold.  timeout: the deadline of
  // wait() without one, counted from when the worker starts the item.
  WorkSMDDP(
      std::shared_ptr<GroupState> state,
      c10d::OpType type,
      const char* name,
      at::Device device,
      std::vector<at::Tensor> outputs,
      std::chrono::milliseconds timeout,
      uint64_t seq,
      Body body);
  ~WorkSMDDP() override;

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void synchronize() override;
  std::vector<at::Tensor> result() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  uint64_t getSequencenumber() const override;
  // Overrides Work::getTimeout in the torch versions that have it.
  std::chrono::milliseconds getTimeout() const;
  // The rank a receive got its message from (recv_anysource); set by the
  // body before the work completes.
  int sourceRank() const override;
  void setSourceRank(int rank) {
    source_.store(rank);
  }

  // The error its body ended with (or why it was not run), null while it
  // has not run or if it succeeded.  Set by the worker before the work is
  // handed to a completer, so that later bodies on the worker see it at
  // once, while exception() may still be null (the completer has not run).
  std::exception_ptr runError() const;

  // Works that start and complete with this one (the sends and receives of
  // a batch); set before it is queued.
  void setMembers(std::vector<c10::intrusive_ptr<WorkSMDDP>> members) {
    members_ = std::move(members);
  }

 private:
  friend class WorkQueue;

  void markStarted();
  // The future, made where the work is prepared (a work whose future
  // nobody can ask for, one run on the caller's current stream and not
  // handed back, has none); getFuture() makes one if it was not.
  void makeFuture();
  c10::intrusive_ptr<c10::ivalue::Future> newFuture() const;
  // On the worker, for a host work whose future nobody asked for yet:
  // completes it here, as no callback can be chained on it (getFuture()
  // makes its future complete from now on).  False when it has a future:
  // a completer must complete it.
  bool completeWithoutFuture(std::exception_ptr error, const std::function<void()>& beforeFinish);
  // The device check's verdicts (CUDA work): its device part ended with the
  // communicator healthy, or error is why it may not have.
  void markVerified();
  void failDevice(std::exception_ptr error);
  // Asks the owning queue for a device check when this work's end event is
  // done and it is not checked yet.
  void checkDeviceIfDone();
  // On a completer thread (or inline, before the work is handed out):
  // completes the future (running its callbacks), calls beforeFinish, then
  // completes the work (waking wait()).
  void complete(std::exception_ptr error, const std::function<void()>& beforeFinish);
  // The caller's current stream waits for the end event (CUDA work).
  void blockCurrentStreamOnEnd();

  std::shared_ptr<GroupState> state_;
  const char* name_;
  const at::Device device_;
  std::vector<at::Tensor> outputs_;
  const std::chrono::milliseconds timeout_;
  const uint64_t seq_;
  Body body_;
  std::vector<c10::intrusive_ptr<WorkSMDDP>> members_;
  std::atomic<int> source_{-1};

  // A work's last user, whichever thread drops the last reference, frees
  // it: the reference count's acquire-release orders every use before the
  // destructor.  ThreadSanitizer (scripts/tsan-torch.sh) sees that count
  // change only in instrumented code, and torch is not instrumented: when
  // torch drops a reference (the Python object's), TSan misses that edge
  // and reports the destructor as racing with the last use on another
  // thread.  So, in TSan builds only, each use of a work by the shim's
  // threads ends with a release on the count's address (TsanUse, the
  // methods below, run() and complete()) and the destructor acquires it:
  // what an instrumented torch would tell TSan.  Races between the uses
  // themselves are still seen.
  struct TsanUse {
    explicit TsanUse(const WorkSMDDP* w) : w(w) {}
    ~TsanUse() {
#ifdef SMDDP_TSAN
      __tsan_release(w->countAddress());
#endif
    }
    TsanUse(const TsanUse&) = delete;
    TsanUse& operator=(const TsanUse&) = delete;
    const WorkSMDDP* w;
  };
  // The reference count of c10::intrusive_ptr_target: its first member,
  // after the vtable pointer (what the instrumented decrements in the
  // shim release on).
  void* countAddress() const {
    return const_cast<char*>(reinterpret_cast<const char*>(
               static_cast<const c10::intrusive_ptr_target*>(this))) +
        sizeof(void*);
  }
  // The issuing thread's state (profiler, dispatch keys), for the worker:
  // taken when the work is queued, not for one run on the caller's thread.
  std::optional<at::ThreadLocalState> tls_;
  // Under mutex_: made where the work is prepared (CUDA work queued on a
  // side stream), or when asked for (getFuture).
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  // completeWithoutFuture() ran, and the error it completed with; under
  // mutex_.
  bool sealed_ = false;
  std::exception_ptr sealedError_;
  // See runError(); under mutex_.
  std::exception_ptr runError_;
  // When the worker started it; under mutex_.
  std::optional<std::chrono::steady_clock::time_point> started_;
  // CUDA work: passed the device check; under mutex_.
  bool verified_ = false;
  // The failure the device check found after the work completed, which
  // exception() reports (finish() would overwrite exception_); under mutex_.
  std::exception_ptr deviceError_;
  // The queue of a work (set by prepare()): for the device checks of a
  // CUDA work, and to tell a wait() on one of its completers.
  std::weak_ptr<WorkQueue> owner_;
#ifdef SMDDP_TORCH_CUDA
  PooledEvent startEvent_; // none on the caller's current stream
  PooledEvent endEvent_;
  std::optional<c10::cuda::CUDAStream> stream_;     // runs the call
  std::optional<c10::cuda::CUDAStream> doneStream_; // completes the future (worker)
#endif
};

class WorkQueue : public std::enable_shared_from_this<WorkQueue> {
 public:
  // Takes comm over: it is freed by stop().  Call start() next.
  WorkQueue(std::shared_ptr<GroupState> state, smddp_comm* comm);
  ~WorkQueue();
  void start();

  // Queues work; throws at once when the group failed or stopped.
  // deviceTensors: the CUDA tensors the call reads or writes (recorded on
  // the side stream for the caching allocator).  mayInline: every library
  // call of its body returns once queued in the queued mode; then CUDA
  // work runs on the caller's thread instead, when the communicator is in
  // that mode and nothing is queued or running before it (see the top of
  // this file).  sync: torch does not hand the work back (async_op
  // False), so one run on the caller's thread runs on its current
  // stream.  Returns true when the work ran so: complete, and nothing
  // waits for it but the device check.
  bool enqueue(
      const c10::intrusive_ptr<WorkSMDDP>& work,
      const std::vector<at::Tensor>& deviceTensors,
      bool mayInline = false,
      bool sync = false);

  // What the CUDA works took: the communicator's mode
  // (smddp_comm_get_cuda_mode, as last seen), how many ran on the caller's
  // thread and how many on the worker.  For tests and benchmarks.
  struct CudaPathStats {
    int mode;
    uint64_t inlined;
    uint64_t queued;
  };
  CudaPathStats cudaPathStats() const;
  // False: every CUDA work goes to the worker (benchmarks compare the two
  // paths; smddp.torch._set_cuda_inline).
  static std::atomic<bool> inlineAllowed;
  // What enqueue() does before queuing: the same checks, and for CUDA work
  // its streams and its start event on the caller's current stream.  For
  // the members of a batch, which are not queued themselves.
  void prepare(
      const c10::intrusive_ptr<WorkSMDDP>& work,
      const std::vector<at::Tensor>& deviceTensors);

  // Local and bounded.  Normal (abort false): lets the queued work run and
  // complete, for at most the group timeout, then fails what is left;
  // joins the worker; releases the communicator (smddp_comm_release) or, if
  // the group failed, aborts it.  abort true: fails the queued work at once
  // and aborts the communicator.  The library call in progress, if any
  // (abort, or work left at the group timeout), is cancelled
  // (smddp_comm_cancel): it ends within about SMDDP_LIVENESS_MS of its
  // sleep, and the worker is joined then.  Callbacks still running
  // after the group timeout are left to finish on their own.  Idempotent.
  void stop(bool abort);
  // For a shrink (ProcessGroupSMDDP::shrink): stops as stop(abort) does,
  // but hands the communicator back instead of freeing it, unless a
  // shim error or an earlier stop() freed it (then null).  Later calls
  // fail saying that the group was shrunk.  Not from the worker thread.
  smddp_comm* handOver(bool abort);

  // At interpreter exit (an atexit hook of smddp.torch): stops every queue
  // still running, normally when it is idle and healthy, else by abort, so
  // that no thread of ours drops a tensor after Python has begun to
  // finalize (taking the GIL then ends the thread and aborts the process).
  static void stopAllAtExit();

  // The device check (see the top of this file), from any thread.  wait
  // false: skipped when another thread uses the communicator.
  void checkDevice(bool wait);

  // A completer of this queue blocks in wait() on a work (a callback
  // that waits for a later collective): a barrier does not wait for it
  // (awaitCompletions).  delta +1 before the wait, -1 after.
  void completerWaits(int delta);

  // How often the idle worker checks while CUDA work is unverified.
  static constexpr std::chrono::milliseconds kDevicePoll{100};

 private:
  // prepare()'s checks: raises when the group failed or stopped.
  void admit(const c10::intrusive_ptr<WorkSMDDP>& work);
  // Where a CUDA work runs (see the top of this file).
  enum class Placement {
    Worker,       // side stream after a start event, done stream, future
    InlineSide,   // the same without the done stream
    InlineCurrent // the caller's current stream, end event only
  };
  void place(
      const c10::intrusive_ptr<WorkSMDDP>& work,
      const std::vector<at::Tensor>& deviceTensors,
      Placement where);
  // Raises DistBackendError: work came after the queue was stopped.
  [[noreturn]] void throwStopped(const WorkSMDDP& work) const;
  // stop() and handOver(): take, hand the communicator back.
  smddp_comm* stopAndTake(bool abort, bool take);
  void loop();
  // The check itself, with commMutex_ held; say: the line for stderr, if
  // it found the first async error.
  void checkDeviceLocked(std::string& say);
  // An async error, rc and the library's sentence for it: the group fails
  // with it, then the listed works (commMutex_ held, unverified_ not empty).
  void failDeviceWork(const std::string& why, std::string& say);
  static void sayDeviceError(const std::string& line);
  // Fails every unverified work with the group's root cause (commMutex_
  // held).
  void failUnverified();
  // Waits until the unverified works' device part is checked (after the
  // worker, and before a barrier), looking at most maxPause apart, or
  // until deadline: then the group fails, "smddp: WHAT on GROUP: work
  // queued on the GPU was not done after the timeout of TIMEOUT ms", and
  // so does what is left.
  void finishDeviceChecks(
      std::chrono::steady_clock::time_point deadline,
      std::chrono::milliseconds timeout,
      const std::string& what,
      std::chrono::milliseconds maxPause = kDevicePoll);
  // Waits until every completion posted so far has run (callbacks and
  // all), or until deadline: several completer threads may finish them
  // out of order, and after a barrier every earlier work must say it is
  // completed.  Callbacks blocked in wait() are not waited for (they may
  // wait for this very barrier).  Worker thread only (nothing is posted
  // meanwhile).
  void awaitCompletions(std::chrono::steady_clock::time_point deadline);
  void run(const c10::intrusive_ptr<WorkSMDDP>& work);
  // The inline path: runs work on this (the caller's) thread if the
  // worker is idle and commMutex_ free, else returns false (queue it).
  bool runInline(
      const c10::intrusive_ptr<WorkSMDDP>& work,
      const std::vector<at::Tensor>& deviceTensors,
      bool sync);
  // A work's body with commMutex_ held, on the worker (onWorker: under
  // the issuing thread's thread-local state) or inline: the device check
  // first, then the body on the side stream, the end events; returns
  // the error to complete it with.  say: as checkDeviceLocked's.
  std::exception_ptr execute(
      const c10::intrusive_ptr<WorkSMDDP>& work,
      bool onWorker,
      std::string& say);
  // Hands work's completion to a completer thread (starting one if every
  // completer is busy), unless it has no future: then it completes here.
  void post(c10::intrusive_ptr<WorkSMDDP> work, std::exception_ptr error);
  void completerLoop();
  // work->complete(), then one work fewer outstanding.
  void completeOne(const c10::intrusive_ptr<WorkSMDDP>& work, std::exception_ptr error);
  void stopCompleters(std::chrono::steady_clock::time_point deadline);
  void freeComm();
#ifdef SMDDP_TORCH_CUDA
  struct DeviceStreams {
    c10::DeviceIndex device;
    c10::cuda::CUDAStream run;
    c10::cuda::CUDAStream done;
  };
  DeviceStreams streamsFor(c10::DeviceIndex device);
#endif

  std::shared_ptr<GroupState> state_;
  // Whoever calls the library on it holds commMutex_ (the worker or the
  // inline path around a body, a device check): one thread at a time, as
  // libsmddp requires.  Written under it too.
  smddp_comm* comm_;
  std::mutex commMutex_;
  // For smddp_comm_cancel from stop() while the worker may be inside a
  // call (and holds commMutex_): whoever clears comm_ also holds this, so
  // that a cancel never reaches a freed communicator.  Taken after
  // commMutex_, never before it.
  std::mutex cancelMutex_;
  void cancelCall();
  // Clears comm_ (commMutex_ held) and returns what it was.
  smddp_comm* takeComm();
  // takeComm(), then aborts it.
  void abortComm();
  // smddp_comm_get_cuda_mode of comm_ once decided (read without a lock
  // by enqueue), and the counts of cudaPathStats().
  std::atomic<int> cudaMode_{SMDDP_CUDA_UNDECIDED};
  std::atomic<uint64_t> inlined_{0};
  std::atomic<uint64_t> queuedCuda_{0};
  // CUDA works run and not checked yet, in issue order; under commMutex_.
  std::deque<c10::intrusive_ptr<WorkSMDDP>> unverified_;
  // !unverified_.empty(), for the worker's wait without commMutex_.
  std::atomic<bool> watching_{false};
  bool deviceErrorSaid_ = false; // under commMutex_

  std::mutex mutex_;
  std::condition_variable workCv_; // worker: work queued or stopping
  std::condition_variable taskCv_; // completers: completion posted or stopping
  std::condition_variable idleCv_; // stop(): work or completions done
  std::deque<c10::intrusive_ptr<WorkSMDDP>> queue_;
  bool busy_ = false;
  bool stopRequested_ = false; // stop() was called
  bool stopping_ = false;      // the worker may leave once the queue is empty
  bool aborting_ = false;
  bool stopped_ = false;
  bool detached_ = false; // stop() ran on the worker thread itself
  std::atomic<bool> handedOver_{false}; // stopped by handOver()
  std::thread thread_;

  struct Completion {
    c10::intrusive_ptr<WorkSMDDP> work;
    std::exception_ptr error;
  };
  std::deque<Completion> completions_;
  std::vector<std::thread> completers_;
  int idleCompleters_ = 0;
  int runningCompletions_ = 0;
  int waitingCompleters_ = 0; // of those, blocked in WorkSMDDP::wait
  int liveCompleters_ = 0;
  // Completions owed: one per work queued and per member of it, less the
  // ones done.  Counted down before the work's waiters wake, so that a
  // script that exits right after a wait() finds the queue idle; busy_
  // and runningCompletions_ still say busy for a moment then.
  int64_t outstanding_ = 0;
  bool completersStop_ = false;

#ifdef SMDDP_TORCH_CUDA
  std::mutex streamMutex_;
  std::vector<DeviceStreams> streams_;
#endif
};

} // namespace smddp_torch
