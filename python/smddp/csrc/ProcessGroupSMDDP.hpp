// ProcessGroupSMDDP.hpp - the "smddp" c10d backend: torch.distributed
// collectives over libsmddp.
//
// One instance per process group (torch builds one only on the group's
// members), each with its own communicator, made by smddp_comm_init_rank()
// from an id that the group's rank 0 publishes in the group's store: nothing
// is read from or written to the environment, so any init_method works and
// sub-groups live beside the world group and beside other backends.
//
// Every op checks its arguments on the caller's thread (what cannot be done
// exactly is refused there, with a c10 error; the shared checkers are in
// Tensors.hpp), then hands one funnel, collective(), a plan of what its
// library calls read and write and the call itself: the funnel owns the
// staging, the PREMUL_SUM premultiply, the check of each call and the copy
// back, and makes the work item.  The work is queued on the group's worker
// (WorkQueue.hpp) and its Work returned at once; CUDA collectives whose
// calls return once queued run on the caller's thread instead when the
// communicator is in the queued mode (WorkQueue::enqueue).
// Tear-down (shutdown(), abort(), the destructor) is local: it never waits
// for the other ranks, who may tear their groups down in another order.
//
// Point to point: send and recv are work items like the collectives, so a
// plain isend or irecv runs in issue order on the worker, and a send
// returns only once the peer's receive took the data (libsmddp's and
// NCCL's contract).  Sends and receives between startCoalescing and
// endCoalescing (batch_isend_irecv) are kept aside and queued at
// endCoalescing as one item that runs them between smddp_group_start and
// smddp_group_end: exchanges with several peers at once cannot deadlock.
//
// The class is defined over three files: ProcessGroupSMDDP.cpp (rendezvous,
// the funnel, the collectives with all_to_all_single, split_group,
// tear-down),
// Exchanges.cpp (the list forms with the list all-to-all, gather, scatter,
// the sparse all-reduce) and PointToPoint.cpp (sends, receives, batches);
// the argument checks and staged tensors they share are in Tensors.cpp.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/version.h>

#include "Tensors.hpp"
#include "Types.hpp"
#include "WorkQueue.hpp"

namespace smddp_torch {

// A send or receive of a batch (startCoalescing .. endCoalescing).
struct P2POp {
  bool isSend;
  at::Tensor tensor;
  int peer; // SMDDP_ANY_SOURCE: a receive from anyone
  int tag;
  c10::intrusive_ptr<WorkSMDDP> work; // its member work
};

// A send or receive as the funnel runs it.  work: the one whose source
// rank a receive sets (a batch's member; null: the work being run).
struct P2PCall {
  bool isSend;
  at::Tensor tensor;
  Moved mv;
  int peer;
  int tag;
  WorkSMDDP* work;
};

// One library call of a collective, on the tensors the funnel staged
// (collective()): src is what it reads (a contiguous copy where the
// caller's tensor is not contiguous, multiplied for PREMUL_SUM), dst what
// it writes (src itself in place); i: which Io of the plan.  Returns the
// library's result; it may name the failing call in ctx.call.
using LibCall = std::function<int(RunContext& ctx, size_t i, const at::Tensor& src,
                                  const at::Tensor& dst)>;
// What the calls read and write, made where the work runs (on the side
// stream for CUDA tensors): the caller's tensors, or flat buffers.
using IoPlan = std::function<std::vector<Io>()>;
// After every call, the dsts in the plan's order: copies from flat
// buffers into the caller's tensors, a receive's source rank.
using AfterCalls = std::function<void(RunContext& ctx, const std::vector<at::Tensor>& dsts)>;

// A work item of the funnel.
struct Collective {
  c10d::OpType type;
  const char* name; // torch's name of the call, in errors
  const char* call; // the library function, in errors
  at::Device device;
  std::vector<at::Tensor> results;  // Work::result(), the future's value
  std::vector<at::Tensor> touched;  // what the side stream uses (CUDA)
  std::chrono::milliseconds timeout; // of wait(); 0: the group's
  std::optional<Reduction> premul = std::nullopt; // PREMUL_SUM: inputs multiplied first
  bool grouped = false; // the calls between smddp_group_start and _end
  // Every call is one that returns once queued when the communicator is
  // in the queued mode (smddp_comm_get_cuda_mode): CUDA work may then run
  // on the caller's thread (WorkQueue::enqueue).
  bool queues = false;
  // torch does not hand the Work back (async_op=False; syncOf): run on the
  // caller's thread, the call goes on its current stream and no Work is
  // returned, as ProcessGroupNCCL does.
  bool sync = false;
  std::vector<c10::intrusive_ptr<WorkSMDDP>> members = {}; // a batch's works
};

// Whether a call torch waits for at once may go on the caller's current
// stream and return no Work: torch 2.8 and later, where ProcessGroupNCCL
// returns none for async_op=False and torch's Python (distributed_c10d.py)
// skips wait() on None.  Before, some options have asyncOp already (2.4:
// broadcast, all_gather_into_tensor, reduce_scatter_tensor and scatter set
// it) but torch's Python calls work.wait() on whatever comes back.
constexpr bool kSyncReturnsNoWork =
    TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 8);

// Whether torch waits for the call at once instead of handing its Work to
// the user (opts.asyncOp false), where kSyncReturnsNoWork.  Only for the
// calls that ProcessGroupNCCL returns no Work for, so that every caller in
// torch already expects None from them: the single-tensor collectives,
// not the coalesced forms.
template <typename Opts>
auto syncOfOptions(const Opts& opts, int) -> decltype(opts.asyncOp, bool()) {
  return kSyncReturnsNoWork && !opts.asyncOp;
}
template <typename Opts>
bool syncOfOptions(const Opts&, long) {
  return false;
}
template <typename Opts>
bool syncOf(const Opts& opts) {
  return syncOfOptions(opts, 0);
}

class ProcessGroupSMDDP : public c10d::Backend {
 public:
  // Collective over the group: rendezvous through store (already prefixed
  // for this group by torch), then smddp_comm_init_rank with timeout as the
  // deadline of every wait.  Throws c10::DistBackendError on failure.
  ProcessGroupSMDDP(
      const c10::intrusive_ptr<c10d::Store>& store,
      int rank,
      int size,
      std::chrono::milliseconds timeout);
  // Over a communicator already made (split() makes one with
  // smddp_comm_split); takes comm over.
  ProcessGroupSMDDP(smddp_comm* comm, int rank, int size, std::chrono::milliseconds timeout);
  ~ProcessGroupSMDDP() override;

  const std::string getBackendName() const override {
    return "smddp";
  }
  // Overrides Backend::getBackendOptions in the torch versions that have it.
  c10::intrusive_ptr<c10d::Backend::Options> getBackendOptions();

  c10::intrusive_ptr<c10d::Work> broadcast(
      std::vector<at::Tensor>& tensors,
      const c10d::BroadcastOptions& opts = c10d::BroadcastOptions()) override;
  c10::intrusive_ptr<c10d::Work> allreduce(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceCoalescedOptions& opts = c10d::AllreduceCoalescedOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce(
      std::vector<at::Tensor>& tensors,
      const c10d::ReduceOptions& opts = c10d::ReduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> allgather(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(
      at::Tensor& output,
      at::Tensor& input,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs,
      std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output,
      at::Tensor& input,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(
      at::Tensor& output,
      at::Tensor& input,
      std::vector<int64_t>& outputSplitSizes,
      std::vector<int64_t>& inputSplitSizes,
      const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
  c10::intrusive_ptr<c10d::Work> barrier(
      const c10d::BarrierOptions& opts = c10d::BarrierOptions()) override;

  // Sparse COO tensors, as gloo does: every rank's indices and values are
  // all-gathered and summed (ReduceOp.SUM only); the result is coalesced.
  // allreduce() sends sparse tensors here too.
  c10::intrusive_ptr<c10d::Work> allreduce_sparse(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override;
  // The list of output lists form: one all-gather of all inputs' bytes.
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputTensorLists,
      std::vector<at::Tensor>& inputTensors,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> gather(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::GatherOptions& opts = c10d::GatherOptions()) override;
  // Data-moving calls (these, broadcast, the all_gather forms and
  // send/recv) take every dtype (Types.hpp, movedAs); all_to_all lists of
  // any sizes go through smddp_alltoallv.
  c10::intrusive_ptr<c10d::Work> scatter(
      std::vector<at::Tensor>& outputs,
      std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ScatterOptions& opts = c10d::ScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> alltoall(
      std::vector<at::Tensor>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
  // One tensor each; tags 0 .. SMDDP_TAG_MAX.  A plain send or receive to
  // this rank itself is refused: only a batch can hold both ends.
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag)
      override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag)
      override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag)
      override;

  // Batches of sends and receives (batch_isend_irecv).  Collectives called
  // inside the window are not part of the batch: they are queued when
  // called, as libsmddp runs them when called inside a group.
  // supportsCoalescing overrides Backend's in the torch versions that have
  // it (torch then coalesces batch_isend_irecv on CPU tensors too).
  bool supportsCoalescing() const;
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  // dist.split_group: every rank of this group calls split() (non-members
  // with some other group's ranks), in the same order as its collectives;
  // smddp_comm_split on this group's worker makes the new communicator,
  // whose rank i is ranks[i].  Returns null where this rank is not in
  // ranks.  split() overrides Backend's in the torch versions that have it;
  // supportsSplitting says true only where torch's split_group and new_group
  // use it as this backend expects (2.15 and later).
  bool supportsSplitting() const override;
  c10::intrusive_ptr<c10d::Backend> split(
      const c10::intrusive_ptr<c10d::Store>& store,
      const std::vector<int>& ranks,
      const c10::intrusive_ptr<c10d::Backend::Options>& opts);

  // dist.shrink_group (torch 2.15 and later; shrink() overrides Backend's
  // there, supportsShrinking says false before): every survivor calls it
  // with the same ranks to exclude, the excluded ones do not.  On the
  // caller's thread: the worker is stopped (SHRINK_DEFAULT lets the queued
  // work run or fail first, bounded by the group timeout; SHRINK_ABORT
  // fails it at once and cancels the call in progress) and hands the
  // communicator over, then smddp_comm_shrink makes the survivors' one,
  // ranked in their old order, with the parent's deadline.  On success
  // the parent is aborted and this group takes no more calls (torch then
  // destroys it: shutdown() has nothing left to do); on failure the parent
  // is kept, and shrink may be called again (with a rank that died during
  // the shrink added).  opts: its timeout, if given, is the new group's
  // (the communicator keeps the parent's deadline).
  bool supportsShrinking() const;
  c10::intrusive_ptr<c10d::Backend> shrink(
      const std::vector<int64_t>& ranks_to_exclude,
      int shrink_flags,
      const c10::intrusive_ptr<c10d::Backend::Options>& opts);

  // dist.set_timeout: the works issued after it wait() for at most the new
  // timeout (from when the worker starts them), and split groups take it
  // as their default.  libsmddp's own deadline, of each wait inside a call,
  // is fixed when the communicator is made: a call still fails at the
  // timeout the group was made with when that is shorter, and shutdown()
  // is bounded by it.  Overrides Backend::setTimeout in the torch versions
  // that have it.
  void setTimeout(std::chrono::milliseconds timeout);

  // Sequence numbers start at 0 on every rank; this is a no-op.
  void setSequenceNumberForGroup() override;
  uint64_t getSequenceNumberForGroup() override;

  // Overrides Backend::shutdown and Backend::abort in the torch versions
  // that have them (not declared override so as to build with the others).
  // shutdown: finish the queued work (bounded by the group timeout), then
  // free the communicator, telling the peers this rank leaves normally.
  // abort: fail the queued work, cancel the library call in progress
  // (smddp_comm_cancel: it ends within about SMDDP_LIVENESS_MS, not at the
  // group timeout) and abort the communicator.
  void shutdown();
  void abort();

  // Which way its CUDA works went (WorkQueue::cudaPathStats): tests and
  // benchmarks (smddp.torch._cuda_path_stats).
  WorkQueue::CudaPathStats cudaPathStats() const {
    return queue_->cudaPathStats();
  }

 private:
  c10::intrusive_ptr<WorkSMDDP> makeWork(
      c10d::OpType type,
      const char* name,
      at::Device device,
      std::vector<at::Tensor> outputs,
      std::chrono::milliseconds timeout,
      WorkSMDDP::Body body);
  // The funnel of every op that moves tensors: plan's Ios staged (copied
  // contiguous, premultiplied), call run on each (checked: a failure
  // raises with the library's sentence), the written outputs copied back,
  // then after; as one work item, on the worker or, for CUDA work that
  // queues in the queued mode, on the caller's thread (ProcessGroupNCCL's
  // collective(inputs, outputs, fn, pre, post)).
  c10::intrusive_ptr<c10d::Work> collective(
      Collective spec,
      IoPlan plan,
      LibCall call,
      AfterCalls after = nullptr);
  // The tensor forms and their coalesced lists, one code each.
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      const std::vector<at::Tensor>& outputs,
      const std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts,
      const char* op,
      c10d::OpType type);
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      const std::vector<at::Tensor>& outputs,
      const std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts,
      const char* op,
      c10d::OpType type);
  // Sends and receives through the funnel; grouped: a batch's, between
  // smddp_group_start and _end.
  c10::intrusive_ptr<c10d::Work> p2pWork(
      std::vector<P2PCall> calls,
      bool grouped,
      const char* name,
      c10d::OpType type,
      at::Device device,
      std::vector<at::Tensor> received,
      std::vector<at::Tensor> touched,
      std::vector<c10::intrusive_ptr<WorkSMDDP>> members);
  // members: works that start and complete with this one (a batch's).
  // mayInline, sync: see Collective::queues and ::sync (null returned for
  // a sync work that ran on the caller's current stream and succeeded).
  c10::intrusive_ptr<c10d::Work> enqueue(
      c10d::OpType type,
      const char* name,
      at::Device device,
      std::vector<at::Tensor> outputs,
      const std::vector<at::Tensor>& touched,
      std::chrono::milliseconds timeout,
      WorkSMDDP::Body body,
      std::vector<c10::intrusive_ptr<WorkSMDDP>> members = {},
      bool mayInline = false,
      bool sync = false);

  // Rank 0 publishes a new id under key, the others read it.
  smddp_unique_id rendezvous(c10d::Store& store, const std::string& key);
  void start(smddp_comm* comm);
  c10::intrusive_ptr<c10d::Work> p2p(
      bool isSend,
      std::vector<at::Tensor>& tensors,
      int peer,
      int tag,
      const char* name,
      c10d::OpType type);
  c10::intrusive_ptr<c10d::Work> sparseAllreduce(
      const at::Tensor& tensor,
      const c10d::AllreduceOptions& opts);

  // The group timeout of the works issued from now on (set_timeout may
  // change it from any thread).
  std::atomic<std::chrono::milliseconds> timeout_;
  std::shared_ptr<GroupState> state_;
  std::shared_ptr<WorkQueue> queue_;
  // Calls issued; written by the issuing thread, read from any
  // (getSequenceNumberForGroup: torch's watchdog, the flight recorder).
  std::atomic<uint64_t> seq_{0};

  // The batch being coalesced (caller's thread only).
  bool coalescing_ = false;
  std::vector<P2POp> batch_;
  // Collectives queued inside the window: endCoalescing without sends or
  // receives returns a work that ends after them, with the first error.
  std::vector<c10::intrusive_ptr<WorkSMDDP>> coalesced_;
  at::Device coalescedDevice_ = at::Device(at::kCPU);

  // shrink(): the parent communicator, handed over by the worker and kept
  // for another try while no shrink succeeded; shrunk_ once one did.
  std::mutex shrinkMutex_;
  smddp_comm* shrinkParent_ = nullptr;
  bool shrunk_ = false;
  // Aborts shrinkParent_, if any (tear-down).
  void dropShrinkParent();

  // The last split: torch calls split() once per device type of the
  // group with the same store, again after a null (this rank not a
  // member), and smddp_comm_split must run once per split_group.
  c10::intrusive_ptr<c10d::Store> splitStore_;
  c10::weak_intrusive_ptr<c10d::Backend> splitMade_{c10::intrusive_ptr<c10d::Backend>()};
};

} // namespace smddp_torch
