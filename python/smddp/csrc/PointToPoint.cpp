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

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::p2pWork(
    std::vector<P2PCall> calls,
    bool grouped,
    const char* name,
    c10d::OpType type,
    at::Device device,
    std::vector<at::Tensor> received,
    std::vector<at::Tensor> touched,
    std::vector<c10::intrusive_ptr<WorkSMDDP>> members) {
  // The source of each receive, known once the calls (the group) ended.
  auto sources = std::make_shared<std::vector<int>>(calls.size(), -1);
  Collective spec{type, name, calls.size() == 1 && calls[0].isSend ? "smddp_send" : "smddp_recv",
                  device, std::move(received), std::move(touched),
                  std::chrono::milliseconds(0), std::nullopt, grouped};
  spec.members = std::move(members);
  return collective(
      std::move(spec),
      [calls] {
        std::vector<Io> ios;
        for (const auto& c : calls)
          ios.push_back(c.isSend ? Io{c.tensor, {}, false} : Io{{}, c.tensor});
        return ios;
      },
      [calls, sources](RunContext& ctx, size_t i, const at::Tensor& src, const at::Tensor& dst) {
        const P2PCall& c = calls[i];
        ctx.call = c.isSend ? "smddp_send" : "smddp_recv";
        if (c.isSend)
          return smddp_send(src.data_ptr(), unitsOf(src, c.mv), c.mv.dtype, c.peer, c.tag,
                            ctx.comm, ctx.stream);
        return smddp_recv(dst.data_ptr(), unitsOf(dst, c.mv), c.mv.dtype, c.peer, c.tag,
                          &(*sources)[i], ctx.comm, ctx.stream);
      },
      [calls, sources](RunContext& ctx, const std::vector<at::Tensor>&) {
        for (size_t i = 0; i < calls.size(); i++)
          if (!calls[i].isSend)
            (calls[i].work ? calls[i].work : ctx.work)
                ->setSourceRank((*sources)[i] >= 0 ? (*sources)[i] : calls[i].peer);
      });
}

// ---- point to point ------------------------------------------------------------

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::p2p(
    bool isSend,
    std::vector<at::Tensor>& tensors,
    int peer,
    int tag,
    const char* name,
    c10d::OpType type) {
  const at::Tensor& t = oneTensor(tensors, name);
  at::Device device = deviceOf(tensors, name);
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
  // The work it makes is the one whose source rank a receive sets: known
  // only once made, so the call is filled in by the body's context.
  std::vector<P2PCall> calls{{isSend, t, movedAs(t.scalar_type()), peer, tag, nullptr}};
  return p2pWork(std::move(calls), false, name, type, device, {t}, {t}, {});
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
  return p2pWork(
      std::move(calls), true, "batch_isend_irecv", c10d::OpType::COALESCED, device,
      std::move(received), std::move(tensors), std::move(members));
}

} // namespace smddp_torch
