// ProcessGroupSMDDP.cpp - the "smddp" c10d backend: rendezvous, the collectives
// (all_to_all_single among them) as work items, split_group, shrink_group and
// tear-down (design in ProcessGroupSMDDP.hpp).  The list forms, gather, scatter and the
// sparse all-reduce are in Exchanges.cpp, sends and receives in
// PointToPoint.cpp, the argument checks in Tensors.cpp.
#include "ProcessGroupSMDDP.hpp"

#include <algorithm>
#include <climits>
#include <cstring>

#include <ATen/MemoryOverlap.h>
#include <c10/util/Exception.h>
#include <torch/version.h>

#include "Tensors.hpp"
#include "Types.hpp"

namespace smddp_torch {

namespace {

// The store key of the communicator id, under the prefix torch gives the
// group.  The value is 'I' and the id, or 'E' and why rank 0 could not make
// one, so that the other ranks fail with the cause instead of a timeout.
//
// One key per generation: after destroy_process_group() torch names its
// groups from the start again, so a group made again on the same store
// has the prefix of an earlier one, and a rank that came before rank 0
// would read the earlier group's id (and fail at the group timeout).  So
// the groups of each size made under the prefix are counted, per group
// rank, in the store (which outlives the processes' groups): every rank of
// a group counts it, so the n-th group of that size reads the n-th id of
// that size, whatever groups of other sizes the prefix had between them.
std::string idKey(c10d::Store& store, int rank, int size) {
  const std::string sz = std::to_string(size);
  int64_t generation = store.add("smddp/generation/" + sz + "/" + std::to_string(rank), 1);
  return "smddp/uid/" + sz + "/" + std::to_string(generation);
}

} // namespace

ProcessGroupSMDDP::ProcessGroupSMDDP(
    const c10::intrusive_ptr<c10d::Store>& store,
    int rank,
    int size,
    std::chrono::milliseconds timeout)
    : c10d::Backend(rank, size), timeout_(timeout) {
  TORCH_CHECK_VALUE(
      size > 0 && rank >= 0 && rank < size,
      "smddp: rank ",
      rank,
      " is not a rank of a group of ",
      size);
  TORCH_CHECK_VALUE(timeout.count() > 0, "smddp: the group timeout must be positive");
  state_ = std::make_shared<GroupState>(rank, size, timeout);

  const std::string key = idKey(*store, rank, size);
  smddp_unique_id id = rendezvous(*store, key);

  smddp_config config;
  std::memset(&config, 0, sizeof(config));
  config.size = sizeof(config);
  config.timeout_ms = timeout.count() > INT_MAX ? INT_MAX : static_cast<int>(timeout.count());
  smddp_comm* comm = nullptr;
  int rc = smddp_comm_init_rank(&comm, size, &id, rank, &config);
  if (rc != SMDDP_OK) {
    std::string detail = smddp_last_error(nullptr);
    throwBackendError(
        "smddp: could not create the communicator of " + state_->who() + ": " +
        (detail.empty() ? std::string(smddp_strerror(rc)) : detail) + " (" +
        smddp_strerror(rc) + ")");
  }
  if (rank == 0) {
    // Every rank has read the id by now: they reached rank 0 with it.
    // Only tidiness (the key is never read again), and not every store
    // can delete.
    try {
      store->deleteKey(key);
    } catch (const std::exception&) {
    }
  }
  start(comm);
}

ProcessGroupSMDDP::ProcessGroupSMDDP(
    smddp_comm* comm,
    int rank,
    int size,
    std::chrono::milliseconds timeout)
    : c10d::Backend(rank, size), timeout_(timeout) {
  state_ = std::make_shared<GroupState>(rank, size, timeout);
  start(comm);
}

void ProcessGroupSMDDP::start(smddp_comm* comm) {
  queue_ = std::make_shared<WorkQueue>(state_, comm);
  queue_->start();
  init();
}

ProcessGroupSMDDP::~ProcessGroupSMDDP() {
  queue_->stop(false);
  dropShrinkParent();
}

smddp_unique_id ProcessGroupSMDDP::rendezvous(c10d::Store& store, const std::string& key) {
  smddp_unique_id id;
  std::memset(&id, 0, sizeof(id));
  if (rank_ == 0) {
    int rc = smddp_get_unique_id(&id);
    if (rc != SMDDP_OK) {
      std::string detail = smddp_last_error(nullptr);
      std::string msg = "rank 0 of the group could not make a communicator id: " +
          (detail.empty() ? std::string(smddp_strerror(rc)) : detail) + " (" +
          smddp_strerror(rc) + ")";
      std::string value = "E" + msg;
      store.set(key, std::vector<uint8_t>(value.begin(), value.end()));
      throwBackendError("smddp: " + msg);
    }
    std::vector<uint8_t> value(1 + sizeof(id.internal));
    value[0] = 'I';
    std::memcpy(value.data() + 1, id.internal, sizeof(id.internal));
    store.set(key, value);
    return id;
  }

  std::vector<uint8_t> value;
  try {
    store.wait({key}, timeout_.load());
    value = store.get(key);
  } catch (const c10::Error& e) {
    throwBackendError(
        "smddp: " + state_->who() + " waited " + std::to_string(timeout_.load().count()) +
        " ms for rank 0 of the group to publish the communicator id in the store: " +
        e.what_without_backtrace());
  }
  if (!value.empty() && value[0] == 'E')
    throwBackendError(
        "smddp: " + state_->who() + " cannot join the group: " +
        std::string(value.begin() + 1, value.end()));
  TORCH_CHECK(
      value.size() == 1 + sizeof(id.internal) && value[0] == 'I',
      "smddp: the store holds a malformed communicator id under '",
      key,
      "' (",
      value.size(),
      " bytes); is another program using the same store prefix?");
  std::memcpy(id.internal, value.data() + 1, sizeof(id.internal));
  return id;
}

c10::intrusive_ptr<c10d::Backend::Options> ProcessGroupSMDDP::getBackendOptions() {
  return c10::make_intrusive<c10d::Backend::Options>("smddp", timeout_.load());
}

c10::intrusive_ptr<WorkSMDDP> ProcessGroupSMDDP::makeWork(
    c10d::OpType type,
    const char* name,
    at::Device device,
    std::vector<at::Tensor> outputs,
    std::chrono::milliseconds timeout,
    WorkSMDDP::Body body) {
  return c10::make_intrusive<WorkSMDDP>(
      state_,
      type,
      name,
      device,
      std::move(outputs),
      timeout.count() > 0 ? timeout : timeout_.load(),
      seq_.load() + 1,
      std::move(body));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::enqueue(
    c10d::OpType type,
    const char* name,
    at::Device device,
    std::vector<at::Tensor> outputs,
    const std::vector<at::Tensor>& touched,
    std::chrono::milliseconds timeout,
    WorkSMDDP::Body body,
    std::vector<c10::intrusive_ptr<WorkSMDDP>> members,
    bool mayInline,
    bool sync) {
  // A written tensor whose elements share memory (expand()) cannot take a
  // result: refused here, on the caller's thread, as ProcessGroupNCCL
  // does, not by the copy back after the collective (which would break
  // the group although every rank finished the call).
  for (const auto& t : outputs)
    TORCH_CHECK_VALUE(
        !t.defined() || t.is_sparse() || at::has_internal_overlap(t) != at::MemOverlap::Yes,
        "smddp: ",
        name,
        ": an output tensor has elements that share memory (expand() or as_strided): "
        "pass one with its own memory for each element, e.g. .clone()");
  auto work = makeWork(type, name, device, std::move(outputs), timeout, std::move(body));
  work->setMembers(std::move(members));
  // Inside a coalescing window the window's end returns the works.
  const bool onCurrentStream = queue_->enqueue(
      work, device.is_cuda() ? touched : std::vector<at::Tensor>(), mayInline,
      sync && !coalescing_);
  if (onCurrentStream) {
    ++seq_;
    // Nothing to wait for on the host, and the stream is ordered already;
    // a failure is raised by the Work, as torch would have waited on it.
    if (!work->runError())
      return {};
    return work;
  }
  if (coalescing_) {
    if (coalesced_.empty())
      coalescedDevice_ = device;
    coalesced_.push_back(work);
  }
  ++seq_;
  return work;
}

// ---- the funnel --------------------------------------------------------------

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::collective(
    Collective spec,
    IoPlan plan,
    LibCall call,
    AfterCalls after) {
  // Built here, run where the work runs (the worker, or the caller's
  // thread on the inline path), on the side stream for CUDA tensors: the
  // staging copies, the premultiply and the flat buffers are queued there.
  std::optional<Reduction> premul;
  if (spec.premul && spec.premul->premul)
    premul = spec.premul;
  const bool grouped = spec.grouped;
  const char* callName = spec.call;
  auto body = [premul, grouped, callName, plan = std::move(plan), call = std::move(call),
               after = std::move(after)](RunContext& ctx) {
    std::vector<Io> ios = plan();
    std::vector<at::Tensor> srcs(ios.size()), dsts(ios.size());
    auto stage = [&](size_t i) {
      const Io& io = ios[i];
      // in undefined: a pure receive; out undefined: in place.
      at::Tensor data = io.in.defined() ? staged(io.in) : receiveBuffer(io.out);
      dsts[i] = io.out.defined() && io.in.defined() ? receiveBuffer(io.out) : data;
      srcs[i] = premul && io.in.defined() ? premultiplied(data, *premul) : data;
    };
    auto copyOut = [&](size_t i) {
      const Io& io = ios[i];
      if (io.written)
        copyBack(io.out.defined() ? io.out : io.in, dsts[i]);
      srcs[i] = at::Tensor(); // a staging buffer goes back to the allocator now
    };
    auto failedCall = [&] { return ctx.call ? ctx.call : callName; };
    if (!grouped) {
      // One call after the other, each staged just before it: a coalesced
      // list holds one staging copy at a time.
      for (size_t i = 0; i < ios.size(); i++) {
        stage(i);
        int rc = call(ctx, i, srcs[i], dsts[i]);
        ctx.check(rc, failedCall());
        copyOut(i);
      }
    } else {
      // Between smddp_group_start and _end, where a receive's data (and
      // source) is known only at the end.
      for (size_t i = 0; i < ios.size(); i++)
        stage(i);
      ctx.check(smddp_group_start(), "smddp_group_start");
      int rc = SMDDP_OK;
      for (size_t i = 0; i < ios.size() && rc == SMDDP_OK; i++)
        rc = call(ctx, i, srcs[i], dsts[i]);
      // Always closed, so that this thread is not left inside a group.
      int end = smddp_group_end();
      if (rc == SMDDP_OK && end != SMDDP_OK) {
        rc = end;
        ctx.call = "smddp_group_end";
      }
      ctx.check(rc, failedCall());
      for (size_t i = 0; i < ios.size(); i++)
        copyOut(i);
    }
    if (after)
      after(ctx, dsts);
  };
  return enqueue(
      spec.type, spec.name, spec.device, std::move(spec.results), spec.touched, spec.timeout,
      std::move(body), std::move(spec.members), spec.queues, spec.sync);
}

// ---- collectives -----------------------------------------------------------

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::allreduce(
    std::vector<at::Tensor>& tensors,
    const c10d::AllreduceOptions& opts) {
  const char* op = "allreduce";
  const at::Tensor& t = oneTensor(tensors, op);
  if (t.is_sparse())
    return sparseAllreduce(t, opts);
  at::Device device = deviceOf(tensors, op);
  Dtype dt = toSmddpDtype(t.scalar_type(), op);
  Reduction red = toSmddpReduction(opts.reduceOp, dt, op);
  return collective(
      {c10d::OpType::ALLREDUCE, op, "smddp_allreduce", device, {t}, withFactor({t}, red),
       opts.timeout, red, false, true, syncOf(opts)},
      [t] { return std::vector<Io>{{t}}; },
      [dt, red](RunContext& ctx, size_t, const at::Tensor& src, const at::Tensor& dst) {
        return smddp_allreduce(src.data_ptr(), dst.data_ptr(), countOf(dst, dt), dt.dtype,
                               red.op, ctx.comm, ctx.stream);
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::allreduce_coalesced(
    std::vector<at::Tensor>& tensors,
    const c10d::AllreduceCoalescedOptions& opts) {
  const char* op = "allreduce_coalesced";
  at::Device device = deviceOf(tensors, op);
  std::vector<Dtype> dts;
  std::vector<Reduction> reds;
  bool sameDtype = true;
  for (const auto& t : tensors) {
    dts.push_back(toSmddpDtype(t.scalar_type(), op));
    reds.push_back(toSmddpReduction(opts.reduceOp, dts.back(), op));
    sameDtype = sameDtype && t.scalar_type() == tensors[0].scalar_type();
  }
  std::vector<at::Tensor> ts = tensors;
  std::vector<at::Tensor> touched = reds.empty() ? ts : withFactor(ts, reds[0]);
  Collective spec{c10d::OpType::ALLREDUCE_COALESCED, op, "smddp_allreduce", device, ts,
                  touched, opts.timeout, reds.empty() ? std::nullopt : std::optional(reds[0]),
                  false, true, false}; // a Work always (syncOf)
  if (sameDtype) {
    // One call over a flat copy of all of them, split back after.
    return collective(
        std::move(spec), [ts] { return std::vector<Io>{{flatOf(ts), {}, false}}; },
        [dts, reds](RunContext& ctx, size_t, const at::Tensor& src, const at::Tensor& dst) {
          return smddp_allreduce(src.data_ptr(), dst.data_ptr(), countOf(dst, dts[0]),
                                 dts[0].dtype, reds[0].op, ctx.comm, ctx.stream);
        },
        [ts](RunContext&, const std::vector<at::Tensor>& dsts) { unflatten(dsts[0], ts); });
  }
  return collective(
      std::move(spec),
      [ts] {
        std::vector<Io> ios;
        for (const auto& t : ts)
          ios.push_back({t});
        return ios;
      },
      [dts, reds](RunContext& ctx, size_t i, const at::Tensor& src, const at::Tensor& dst) {
        return smddp_allreduce(src.data_ptr(), dst.data_ptr(), countOf(dst, dts[i]),
                               dts[i].dtype, reds[i].op, ctx.comm, ctx.stream);
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::broadcast(
    std::vector<at::Tensor>& tensors,
    const c10d::BroadcastOptions& opts) {
  const char* op = "broadcast";
  const at::Tensor& t = oneTensor(tensors, op);
  TORCH_CHECK_VALUE(opts.rootTensor == 0, "smddp: broadcast: rootTensor must be 0");
  checkRoot(opts.rootRank, size_, op);
  at::Device device = deviceOf(tensors, op);
  // Only moved: any dtype (DDP broadcasts every buffer of a module).
  Moved mv = movedAs(t.scalar_type());
  int root = static_cast<int>(opts.rootRank);
  bool isRoot = root == rank_;
  return collective(
      {c10d::OpType::BROADCAST, op, "smddp_broadcast", device, {t}, {t}, opts.timeout,
       std::nullopt, false, true, syncOf(opts)},
      [t, isRoot] { return std::vector<Io>{{t, {}, !isRoot}}; },
      [mv, root](RunContext& ctx, size_t, const at::Tensor&, const at::Tensor& dst) {
        return smddp_broadcast(dst.data_ptr(), unitsOf(dst, mv), mv.dtype, root, ctx.comm,
                               ctx.stream);
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::reduce(
    std::vector<at::Tensor>& tensors,
    const c10d::ReduceOptions& opts) {
  const char* op = "reduce";
  const at::Tensor& t = oneTensor(tensors, op);
  TORCH_CHECK_VALUE(opts.rootTensor == 0, "smddp: reduce: rootTensor must be 0");
  checkRoot(opts.rootRank, size_, op);
  at::Device device = deviceOf(tensors, op);
  Dtype dt = toSmddpDtype(t.scalar_type(), op);
  Reduction red = toSmddpReduction(opts.reduceOp, dt, op);
  int root = static_cast<int>(opts.rootRank);
  bool isRoot = root == rank_;
  return collective(
      {c10d::OpType::REDUCE, op, "smddp_reduce", device, {t}, withFactor({t}, red), opts.timeout,
       red, false, true, syncOf(opts)},
      [t, isRoot] { return std::vector<Io>{{t, {}, isRoot}}; },
      [dt, red, root](RunContext& ctx, size_t, const at::Tensor& src, const at::Tensor& dst) {
        return smddp_reduce(src.data_ptr(), dst.data_ptr(), countOf(dst, dt), dt.dtype, red.op,
                            root, ctx.comm, ctx.stream);
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::allgather(
    std::vector<std::vector<at::Tensor>>& outputs,
    std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const char* op = "allgather";
  const at::Tensor& in = oneTensor(inputs, op);
  const std::vector<at::Tensor>& outs = oneList(outputs, op);
  checkPerRank(outs, size_, op, "output");
  std::vector<at::Tensor> all = outs;
  all.push_back(in);
  at::Device device = deviceOf(all, op);
  checkSameDtype(all, op);
  checkNumel(outs, in.numel(), op, "an output", "the input");
  Moved mv = movedAs(in.scalar_type());
  int size = size_;
  return collective(
      {c10d::OpType::ALLGATHER, op, "smddp_allgather", device, outs, all, opts.timeout,
       std::nullopt, false, true, syncOf(opts)},
      [in, size] { return std::vector<Io>{{in, at::empty({size * in.numel()}, in.options())}}; },
      [mv](RunContext& ctx, size_t, const at::Tensor& src, const at::Tensor& dst) {
        return smddp_allgather(src.data_ptr(), dst.data_ptr(), unitsOf(src, mv), mv.dtype,
                               ctx.comm, ctx.stream);
      },
      [outs](RunContext&, const std::vector<at::Tensor>& dsts) { unflatten(dsts[0], outs); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::_allgather_base(
    at::Tensor& output,
    at::Tensor& input,
    const c10d::AllgatherOptions& opts) {
  return allgather_into_tensor_coalesced(
      {output}, {input}, opts, "all_gather_into_tensor", c10d::OpType::_ALLGATHER_BASE);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs,
    std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  return allgather_into_tensor_coalesced(
      outputs, inputs, opts, "allgather_into_tensor_coalesced", c10d::OpType::COALESCED);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::allgather_into_tensor_coalesced(
    const std::vector<at::Tensor>& outputs,
    const std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts,
    const char* op,
    c10d::OpType type) {
  std::vector<at::Tensor> all = outputs;
  all.insert(all.end(), inputs.begin(), inputs.end());
  at::Device device = deviceOf(all, op);
  checkCoalescedPairs(outputs, inputs, true, size_, op);
  std::vector<Moved> mvs;
  for (const auto& in : inputs)
    mvs.push_back(movedAs(in.scalar_type()));
  return collective(
      {type, op, "smddp_allgather", device, outputs, all, opts.timeout, std::nullopt, false,
       true, type == c10d::OpType::_ALLGATHER_BASE && syncOf(opts)},
      [ins = inputs, outs = outputs] { return pairsOf(ins, outs); },
      [mvs](RunContext& ctx, size_t i, const at::Tensor& src, const at::Tensor& dst) {
        return smddp_allgather(src.data_ptr(), dst.data_ptr(), unitsOf(src, mvs[i]),
                               mvs[i].dtype, ctx.comm, ctx.stream);
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::reduce_scatter(
    std::vector<at::Tensor>& outputs,
    std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const char* op = "reduce_scatter";
  const at::Tensor& out = oneTensor(outputs, op);
  const std::vector<at::Tensor>& ins = oneList(inputs, op);
  checkPerRank(ins, size_, op, "input");
  std::vector<at::Tensor> all = ins;
  all.push_back(out);
  at::Device device = deviceOf(all, op);
  checkSameDtype(all, op);
  checkNumel(ins, out.numel(), op, "an input", "the output");
  Dtype dt = toSmddpDtype(out.scalar_type(), op);
  Reduction red = toSmddpReduction(opts.reduceOp, dt, op);
  return collective(
      {c10d::OpType::REDUCE_SCATTER, op, "smddp_reduce_scatter", device, {out},
       withFactor(all, red), opts.timeout, red, false, true, syncOf(opts)},
      [ins, out] { return std::vector<Io>{{flatOf(ins), out}}; },
      [dt, red](RunContext& ctx, size_t, const at::Tensor& src, const at::Tensor& dst) {
        return smddp_reduce_scatter(src.data_ptr(), dst.data_ptr(), countOf(dst, dt), dt.dtype,
                                    red.op, ctx.comm, ctx.stream);
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::_reduce_scatter_base(
    at::Tensor& output,
    at::Tensor& input,
    const c10d::ReduceScatterOptions& opts) {
  return reduce_scatter_tensor_coalesced(
      {output}, {input}, opts, "reduce_scatter_tensor", c10d::OpType::_REDUCE_SCATTER_BASE);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs,
    std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  return reduce_scatter_tensor_coalesced(
      outputs, inputs, opts, "reduce_scatter_tensor_coalesced", c10d::OpType::COALESCED);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::reduce_scatter_tensor_coalesced(
    const std::vector<at::Tensor>& outputs,
    const std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts,
    const char* op,
    c10d::OpType type) {
  std::vector<at::Tensor> all = outputs;
  all.insert(all.end(), inputs.begin(), inputs.end());
  at::Device device = deviceOf(all, op);
  checkCoalescedPairs(outputs, inputs, false, size_, op);
  std::vector<Dtype> dts;
  std::vector<Reduction> reds;
  for (const auto& in : inputs) {
    dts.push_back(toSmddpDtype(in.scalar_type(), op));
    reds.push_back(toSmddpReduction(opts.reduceOp, dts.back(), op));
  }
  if (!reds.empty())
    all = withFactor(all, reds[0]);
  return collective(
      {type, op, "smddp_reduce_scatter", device, outputs, all, opts.timeout,
       reds.empty() ? std::nullopt : std::optional(reds[0]), false, true,
       type == c10d::OpType::_REDUCE_SCATTER_BASE && syncOf(opts)},
      [ins = inputs, outs = outputs] { return pairsOf(ins, outs); },
      [dts, reds](RunContext& ctx, size_t i, const at::Tensor& src, const at::Tensor& dst) {
        return smddp_reduce_scatter(src.data_ptr(), dst.data_ptr(), countOf(dst, dts[i]),
                                    dts[i].dtype, reds[i].op, ctx.comm, ctx.stream);
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::alltoall_base(
    at::Tensor& output,
    at::Tensor& input,
    std::vector<int64_t>& outputSplitSizes,
    std::vector<int64_t>& inputSplitSizes,
    const c10d::AllToAllOptions& opts) {
  const char* op = "all_to_all_single";
  at::Device device = deviceOf({output, input}, op);
  checkSameDtype({output, input}, op);
  std::vector<int64_t> sendRows = rowsPerRank(inputSplitSizes, input, size_, "input");
  std::vector<int64_t> recvRows = rowsPerRank(outputSplitSizes, output, size_, "output");
  Moved mv = movedAs(input.scalar_type());
  Blocks send = blocksOf(sendRows, static_cast<size_t>(rowNumel(input)) * mv.units);
  Blocks recv = blocksOf(recvRows, static_cast<size_t>(rowNumel(output)) * mv.units);
  // Always smddp_alltoallv, even where this rank's blocks are equal: a
  // peer's may not be, and the plain all-to-all (another protocol) would
  // not meet its alltoallv.  It returns once done: never inline.
  at::Tensor in = input, out = output;
  return collective(
      {c10d::OpType::ALLTOALL_BASE, op, "smddp_alltoallv", device, {out}, {out, in},
       opts.timeout},
      [in, out] { return std::vector<Io>{{in, out}}; },
      [mv, send, recv](RunContext& ctx, size_t, const at::Tensor& src, const at::Tensor& dst) {
        // The library's all-to-all is not in place.
        at::Tensor from = src.numel() > 0 && src.data_ptr() == dst.data_ptr() ? src.clone() : src;
        return smddp_alltoallv(from.data_ptr(), send.counts.data(), send.displs.data(),
                               dst.data_ptr(), recv.counts.data(), recv.displs.data(), mv.dtype,
                               ctx.comm, ctx.stream);
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::barrier(const c10d::BarrierOptions& opts) {
  // A host barrier, run once this rank's work queued before it is done,
  // on the GPU too (WorkQueue::run), as NCCL's barrier().wait() is.
  auto body = [](RunContext& ctx) { ctx.check(smddp_barrier(ctx.comm), "smddp_barrier"); };
  return enqueue(
      c10d::OpType::BARRIER, "barrier", at::Device(at::kCPU), {}, {}, opts.timeout,
      std::move(body));
}

// ---- split_group -------------------------------------------------------------------

bool ProcessGroupSMDDP::supportsSplitting() const {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 15)
  return true;
#else
  // Earlier torch may offer this backend to other backends' groups as
  // the one to split from (new_group(backend="nccl") over the world).
  return false;
#endif
}

c10::intrusive_ptr<c10d::Backend> ProcessGroupSMDDP::split(
    const c10::intrusive_ptr<c10d::Store>& store,
    const std::vector<int>& ranks,
    const c10::intrusive_ptr<c10d::Backend::Options>& opts) {
  const char* op = "split_group";
  // The same split_group asking again for another device type (the store
  // is the new group's, one per split_group; held so that its address
  // cannot come back): what the first call made, or null again.
  if (store && store == splitStore_)
    return splitMade_.lock();
  splitStore_ = store;
  splitMade_ = c10::weak_intrusive_ptr<c10d::Backend>(c10::intrusive_ptr<c10d::Backend>());
  TORCH_CHECK_VALUE(!ranks.empty(), "smddp: split_group: no ranks");
  std::vector<bool> seen(size_, false);
  for (int r : ranks) {
    checkPeer(r, size_, op, "split");
    TORCH_CHECK_VALUE(!seen[r], "smddp: split_group: rank ", r, " is given twice");
    seen[r] = true;
  }
  // Groups do not overlap (torch checks), so the smallest rank of each
  // names it; a rank's place in its group's list is its new rank.
  int color = -1, key = 0;
  auto it = std::find(ranks.begin(), ranks.end(), rank_);
  if (it != ranks.end()) {
    color = *std::min_element(ranks.begin(), ranks.end());
    key = static_cast<int>(it - ranks.begin());
  }
  // The new group's own timeout is its communicator's deadline too.
  std::chrono::milliseconds timeout =
      opts && opts->timeout.count() > 0 ? opts->timeout : timeout_.load();
  smddp_config config;
  std::memset(&config, 0, sizeof(config));
  config.size = sizeof(config);
  config.timeout_ms = timeout.count() > INT_MAX ? INT_MAX : static_cast<int>(timeout.count());
  auto made = std::make_shared<smddp_comm*>(nullptr);
  auto body = [color, key, made, config](RunContext& ctx) {
    ctx.check(
        smddp_comm_split_config(ctx.comm, color, key, &config, made.get()),
        "smddp_comm_split_config");
  };
  auto work = enqueue(
      c10d::OpType::UNKNOWN, op, at::Device(at::kCPU), {}, {}, std::chrono::milliseconds(0),
      std::move(body));
  work->wait();
  if (color < 0)
    return nullptr;
  smddp_comm* comm = *made;
  TORCH_CHECK(comm != nullptr, "smddp: split_group: smddp_comm_split made no communicator");
  const int gotRank = smddp_comm_rank(comm), gotSize = smddp_comm_size(comm);
  if (gotRank != key || gotSize != static_cast<int>(ranks.size())) {
    // Not kept: its peers learn of the abort rather than wait for it.
    smddp_comm_abort(comm);
    TORCH_CHECK(
        false,
        "smddp: split_group: the new communicator has this rank as ",
        gotRank,
        " of ",
        gotSize,
        ", not ",
        key,
        " of ",
        ranks.size());
  }
  c10::intrusive_ptr<c10d::Backend> child = c10::make_intrusive<ProcessGroupSMDDP>(
      comm, key, static_cast<int>(ranks.size()), timeout);
  splitMade_ = c10::weak_intrusive_ptr<c10d::Backend>(child);
  return child;
}

// ---- shrink_group ------------------------------------------------------------------

bool ProcessGroupSMDDP::supportsShrinking() const {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 15)
  return true;
#else
  return false; // no shrink_group before torch 2.15
#endif
}

c10::intrusive_ptr<c10d::Backend> ProcessGroupSMDDP::shrink(
    const std::vector<int64_t>& ranks_to_exclude,
    int shrink_flags,
    const c10::intrusive_ptr<c10d::Backend::Options>& opts) {
  // torch's SHRINK_DEFAULT and SHRINK_ABORT (distributed_c10d.py).
  constexpr int kTorchShrinkAbort = 0x01;
  TORCH_CHECK_VALUE(
      shrink_flags == 0 || shrink_flags == kTorchShrinkAbort,
      "smddp: shrink_group: shrink_flags must be SHRINK_DEFAULT (0) or SHRINK_ABORT (1), not ",
      shrink_flags);
  TORCH_CHECK_VALUE(!ranks_to_exclude.empty(), "smddp: shrink_group: no rank to exclude");
  std::vector<bool> seen(size_, false);
  std::vector<int> exclude;
  for (int64_t r : ranks_to_exclude) {
    TORCH_CHECK_VALUE(
        r >= 0 && r < size_,
        "smddp: shrink_group: rank ",
        r,
        " is not a rank of this group of ",
        size_);
    TORCH_CHECK_VALUE(!seen[r], "smddp: shrink_group: rank ", r, " is given twice");
    TORCH_CHECK_VALUE(
        r != rank_,
        "smddp: shrink_group: rank ",
        r,
        " is this rank itself: an excluded rank does not call shrink_group");
    seen[r] = true;
    exclude.push_back(static_cast<int>(r));
  }
  TORCH_CHECK_VALUE(
      static_cast<int>(exclude.size()) < size_,
      "smddp: shrink_group: every rank of the group is excluded");

  std::lock_guard<std::mutex> lock(shrinkMutex_);
  if (shrunk_)
    throwBackendError(
        "smddp: shrink_group on " + state_->who() +
        ": this group was shrunk already; shrink the group that shrink_group returned");
  if (!shrinkParent_) {
    smddp_comm* parent = queue_->handOver((shrink_flags & kTorchShrinkAbort) != 0);
    if (!parent)
      throwBackendError(
          "smddp: shrink_group on " + state_->who() +
          ": the group's communicator is gone (the group was shut down or aborted, or "
          "freed after an error of the backend itself" +
          (state_->failed() ? ": " + state_->rootCause() : std::string()) +
          "); nothing is left to shrink");
    shrinkParent_ = parent;
  }
  smddp_comm* comm = nullptr;
  int rc;
  {
    // The survivors meet: the GIL must not hold up this rank's callbacks.
    GilRelease noGil;
    rc = smddp_comm_shrink(
        shrinkParent_, exclude.data(), static_cast<int>(exclude.size()),
        (shrink_flags & kTorchShrinkAbort) ? SMDDP_SHRINK_ABORT : SMDDP_SHRINK_DEFAULT, &comm);
  }
  if (rc != SMDDP_OK) {
    std::string detail = smddp_last_error(shrinkParent_);
    throwBackendError(
        "smddp: shrink_group failed on " + state_->who() + ": " +
        (detail.empty() ? std::string(smddp_strerror(rc)) : detail) + " (" +
        smddp_strerror(rc) + "); the group runs no more collectives, but shrink_group "
        "may be called on it again (with any rank that died since added to "
        "ranks_to_exclude)");
  }
  smddp_comm_abort(shrinkParent_);
  shrinkParent_ = nullptr;
  shrunk_ = true;
  std::chrono::milliseconds timeout =
      opts && opts->timeout.count() > 0 ? opts->timeout : timeout_.load();
  return c10::make_intrusive<ProcessGroupSMDDP>(
      comm, smddp_comm_rank(comm), smddp_comm_size(comm), timeout);
}

void ProcessGroupSMDDP::dropShrinkParent() {
  std::lock_guard<std::mutex> lock(shrinkMutex_);
  if (shrinkParent_)
    smddp_comm_abort(shrinkParent_);
  shrinkParent_ = nullptr;
}

// ---- bookkeeping and tear-down ---------------------------------------------------

void ProcessGroupSMDDP::setSequenceNumberForGroup() {}

uint64_t ProcessGroupSMDDP::getSequenceNumberForGroup() {
  return seq_.load();
}

void ProcessGroupSMDDP::setTimeout(std::chrono::milliseconds timeout) {
  TORCH_CHECK_VALUE(
      timeout.count() > 0,
      "smddp: set_timeout: the timeout must be positive, not ",
      timeout.count(),
      " ms");
  timeout_.store(timeout);
}

void ProcessGroupSMDDP::shutdown() {
  // After a shrink the queue is stopped already: nothing is left to do
  // but drop a parent that a failed shrink left.
  queue_->stop(false);
  dropShrinkParent();
}

void ProcessGroupSMDDP::abort() {
  queue_->stop(true);
  dropShrinkParent();
}

} // namespace smddp_torch
