// PointToPoint.cpp - the "smddp" backend's sends and receives, alone or in
// a batch (batch_isend_irecv: startCoalescing .. endCoalescing).
#include "ProcessGroupSMDDP.hpp"

#include <algorithm>
#include <climits>
#include <cstring>

#include <c10/util/Exception.h>
#include <torch/version.h>

#include "Tensors.hpp"
#include "Types.hpp"

namespace smddp_torch {

namespace {

// One send or receive as the worker runs it.  work: the one whose source
// rank a receive sets (alive while the body runs: the batch holds its
// members, the queue the work it runs).
struct P2PCall {
  bool isSend;
  at::Tensor tensor;
  Moved mv;
  int peer;
  int tag;
  WorkSMDDP* work;
};

// Runs calls, between smddp_group_start and smddp_group_end when grouped
// (where a receive's source rank is known only at the end).
void runP2P(RunContext& ctx, const std::vector<P2PCall>& calls, bool grouped) {
  std::vector<at::Tensor> bufs;
  bufs.reserve(calls.size());
  for (const auto& c : calls)
    bufs.push_back(c.isSend ? staged(c.tensor) : receiveBuffer(c.tensor));
  std::vector<int> sources(calls.size(), -1);
  if (grouped)
    ctx.check(smddp_group_start(), "smddp_group_start");
  int rc = SMDDP_OK;
  const char* call = "";
  for (size_t i = 0; i < calls.size() && rc == SMDDP_OK; i++) {
    const P2PCall& c = calls[i];
    size_t count = unitsOf(bufs[i], c.mv);
    if (c.isSend) {
      rc = smddp_send(bufs[i].data_ptr(), count, c.mv.dtype, c.peer, c.tag, ctx.comm, ctx.stream);
      call = "smddp_send";
    } else {
      rc = smddp_recv(bufs[i].data_ptr(), count, c.mv.dtype, c.peer, c.tag, &sources[i],
                      ctx.comm, ctx.stream);
      call = "smddp_recv";
    }
  }
  if (grouped) {
    // Always closed, so that this thread is not left inside a group.
    int end = smddp_group_end();
    if (rc == SMDDP_OK) {
      rc = end;
      call = "smddp_group_end";
    }
  }
  ctx.check(rc, call);
  for (size_t i = 0; i < calls.size(); i++) {
    if (calls[i].isSend)
      continue;
    copyBack(calls[i].tensor, bufs[i]);
    calls[i].work->setSourceRank(sources[i] >= 0 ? sources[i] : calls[i].peer);
  }
}

} // namespace

// ---- point to point ------------------------------------------------------------

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::p2p(
    bool isSend,
    std::vector<at::Tensor>& tensors,
    int peer,
    int tag,
    const char* name,
    c10d::OpType type) {
  TORCH_CHECK_VALUE(
      tensors.size() == 1, "smddp: ", name, " takes one tensor, not ", tensors.size());
  at::Device device = deviceOf(tensors, name);
  at::Tensor t = tensors[0];
  if (peer != SMDDP_ANY_SOURCE)
    checkPeer(peer, size_, name, isSend ? "destination" : "source");
  TORCH_CHECK_VALUE(
      tag >= 0, "smddp: ", name, ": tag ", tag, " is negative (tags are 0 to ", SMDDP_TAG_MAX, ")");

  if (coalescing_) {
    // Kept for endCoalescing; its work completes with the batch.
    if (!batch_.empty())
      TORCH_CHECK_VALUE(
          batch_[0].tensor.device() == device,
          "smddp: the sends and receives of one batch must be on one device; got ",
          batch_[0].tensor.device(),
          " and ",
          device);
    auto work = makeWork(type, name, device, {t}, std::chrono::milliseconds(0), nullptr);
    queue_->prepare(work, device.is_cuda() ? std::vector<at::Tensor>{t} : std::vector<at::Tensor>());
    ++seq_;
    batch_.push_back({isSend, t, peer, tag, work});
    return work;
  }

  TORCH_CHECK_VALUE(
      peer != rank_,
      "smddp: ",
      name,
      (isSend ? " to" : " from"),
      " this rank itself (",
      rank_,
      ") is only possible in batch_isend_irecv, beside its matching ",
      (isSend ? "irecv" : "isend"));
  Moved mv = movedAs(t.scalar_type());
  auto body = [isSend, t, mv, peer, tag](RunContext& ctx) {
    runP2P(ctx, {P2PCall{isSend, t, mv, peer, tag, ctx.work}}, false);
  };
  return enqueue(type, name, device, {t}, {t}, std::chrono::milliseconds(0), std::move(body));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::send(
    std::vector<at::Tensor>& tensors,
    int dstRank,
    int tag) {
  return p2p(true, tensors, dstRank, tag, "send", c10d::OpType::SEND);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::recv(
    std::vector<at::Tensor>& tensors,
    int srcRank,
    int tag) {
  return p2p(false, tensors, srcRank, tag, "recv", c10d::OpType::RECV);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::recvAnysource(
    std::vector<at::Tensor>& tensors,
    int tag) {
  return p2p(false, tensors, SMDDP_ANY_SOURCE, tag, "recv from any source",
             c10d::OpType::RECVANYSOURCE);
}

bool ProcessGroupSMDDP::supportsCoalescing() const {
  return true;
}

void ProcessGroupSMDDP::startCoalescing() {
  if (coalescing_ && !batch_.empty()) {
    // A batch left open (an exception inside torch's coalescing manager
    // skips endCoalescing): its works fail, without running, rather than
    // wait for ever; the peers never see its sends and receives.
    std::vector<c10::intrusive_ptr<WorkSMDDP>> members;
    for (const auto& o : batch_)
      members.push_back(o.work);
    auto body = [](RunContext& ctx) {
      ctx.recoverable = true;
      TORCH_CHECK(
          false,
          "smddp: a batch of sends and receives on ",
          ctx.state.who(),
          " was never ended (endCoalescing) and was dropped unrun");
    };
    enqueue(
        c10d::OpType::COALESCED, "batch_isend_irecv", batch_[0].tensor.device(), {}, {},
        std::chrono::milliseconds(0), std::move(body), std::move(members));
  }
  coalescing_ = true;
  batch_.clear();
  coalesced_.clear();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::endCoalescing() {
  TORCH_CHECK(coalescing_, "smddp: endCoalescing on ", state_->who(), " without startCoalescing");
  coalescing_ = false;
  std::vector<P2POp> ops = std::move(batch_);
  std::vector<c10::intrusive_ptr<WorkSMDDP>> colls = std::move(coalesced_);
  batch_.clear();
  coalesced_.clear();
  if (ops.empty() && colls.empty())
    return nullptr; // nothing was issued (as ProcessGroupNCCL)
  if (ops.empty()) {
    // Only collectives (torch's coalescing manager over all_reduce, as
    // DeepSpeed uses it): torch waits on this work alone.  It runs after
    // them (one queue, in order) and fails with the first one's error.
    // That is runError(), which the worker set before running this; their
    // exception() is set later, by a completer, and may not be yet.
    auto body = [colls](RunContext& ctx) {
      ctx.recoverable = true;
      for (const auto& w : colls) {
        std::exception_ptr e = w->runError();
        if (!e)
          continue;
        try {
          std::rethrow_exception(e);
        } catch (const c10::DistBackendError&) {
          throw;
        } catch (const c10::Error& x) {
          throwBackendError(x.what_without_backtrace());
        } catch (const std::exception& x) {
          throwBackendError(std::string("smddp: ") + x.what());
        }
      }
    };
    return enqueue(
        c10d::OpType::COALESCED, "coalesced collectives", coalescedDevice_, {}, {},
        std::chrono::milliseconds(0), std::move(body));
  }
  at::Device device = ops[0].tensor.device();
  std::vector<P2PCall> calls;
  std::vector<c10::intrusive_ptr<WorkSMDDP>> members;
  std::vector<at::Tensor> tensors, received;
  for (const auto& o : ops) {
    calls.push_back({o.isSend, o.tensor, movedAs(o.tensor.scalar_type()), o.peer, o.tag,
                     o.work.get()});
    members.push_back(o.work);
    tensors.push_back(o.tensor);
    if (!o.isSend)
      received.push_back(o.tensor);
  }
  auto body = [calls](RunContext& ctx) { runP2P(ctx, calls, true); };
  return enqueue(
      c10d::OpType::COALESCED, "batch_isend_irecv", device, received, tensors,
      std::chrono::milliseconds(0), std::move(body), std::move(members));
}

} // namespace smddp_torch
