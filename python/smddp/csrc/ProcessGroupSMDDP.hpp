// ProcessGroupSMDDP.hpp - the "smddp" c10d backend: torch.distributed
// collectives over libsmddp.
//
// One instance per process group (torch builds one only on the group's
// members), each with its own communicator, made by smddp_comm_init_rank()
// from an id that the group's rank 0 publishes in the group's store: nothing
// is read from or written to the environment, so any init_method works and
// sub-groups live beside the world group and beside other backends.
//
// Every collective checks its arguments on the caller's thread (what cannot
// be done exactly is refused there, with a c10 error), then queues the work
// on the group's worker (WorkQueue.hpp) and returns its Work at once.
// Tear-down (shutdown(), abort(), the destructor) is local: it never waits
// for the other ranks, who may tear their groups down in another order.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "WorkQueue.hpp"

namespace smddp_torch {

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

  // Not in this release: each throws c10::NotImplementedError saying so.
  c10::intrusive_ptr<c10d::Work> allreduce_sparse(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputTensorLists,
      std::vector<at::Tensor>& inputTensors,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> gather(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::GatherOptions& opts = c10d::GatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> scatter(
      std::vector<at::Tensor>& outputs,
      std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ScatterOptions& opts = c10d::ScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> alltoall(
      std::vector<at::Tensor>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag)
      override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag)
      override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag)
      override;

  // Sequence numbers start at 0 on every rank; this is a no-op.
  void setSequenceNumberForGroup() override;
  uint64_t getSequenceNumberForGroup() override;

  // Overrides Backend::shutdown and Backend::abort in the torch versions
  // that have them (not declared override so as to build with the others).
  // shutdown: finish the queued work (bounded by the group timeout), then
  // free the communicator, telling the peers this rank leaves normally.
  // abort: fail the queued work and abort the communicator.
  void shutdown();
  void abort();

 private:
  c10::intrusive_ptr<c10d::Work> enqueue(
      c10d::OpType type,
      const char* name,
      at::Device device,
      std::vector<at::Tensor> outputs,
      const std::vector<at::Tensor>& touched,
      std::chrono::milliseconds timeout,
      WorkSMDDP::Body body);

  smddp_unique_id rendezvous(c10d::Store& store);

  std::chrono::milliseconds timeout_;
  std::shared_ptr<GroupState> state_;
  std::shared_ptr<WorkQueue> queue_;
  uint64_t seq_ = 0;
};

} // namespace smddp_torch
