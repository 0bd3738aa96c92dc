// ProcessGroupSMDDP.cpp - the "smddp" c10d backend: rendezvous, argument
// checks and the collectives as work items (design in ProcessGroupSMDDP.hpp).
#include "ProcessGroupSMDDP.hpp"

#include <algorithm>
#include <climits>
#include <cstring>

#include <c10/util/Exception.h>
#include <torch/version.h>

#include "Types.hpp"

namespace smddp_torch {

namespace {

// The store key of the communicator id, under the prefix torch gives the
// group.  The value is 'I' and the id, or 'E' and why rank 0 could not make
// one, so that the other ranks fail with the cause instead of a timeout.
constexpr const char* kIdKey = "smddp/uid";

void checkTensor(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.defined(), "smddp: ", op, " got an undefined tensor");
  if (t.layout() == at::kStrided)
    return;
  std::string layout = t.is_sparse() ? "sparse COO" : c10::str(t.layout());
  if (t.is_sparse_csr())
    layout = "sparse compressed (" + c10::str(t.layout()) + ")";
  throwNotSupported(
      std::string(op) + " on " + layout + " tensors", "Only dense (strided) tensors are.");
}

// CPU, or CUDA where this build has the CUDA path.
void checkDevice(const at::Device& device, const char* op) {
  if (device.is_cuda()) {
#ifndef SMDDP_TORCH_CUDA
    throwNotSupported(
        std::string(op) + " on CUDA tensors in this build",
        "This smddp torch extension was built without CUDA; reinstall it with a CUDA build "
        "of torch and the CUDA toolkit (CUDA_HOME) present.");
#endif
  } else if (!device.is_cpu()) {
    throwNotSupported(
        std::string(op) + " on " + c10::DeviceTypeName(device.type()) + " tensors",
        "CPU and CUDA tensors are.");
  }
}

// The one device all tensors of a call are on: CPU, or one CUDA device.
at::Device deviceOf(const std::vector<at::Tensor>& tensors, const char* op) {
  TORCH_CHECK(!tensors.empty(), "smddp: ", op, " got no tensors");
  for (const auto& t : tensors)
    checkTensor(t, op);
  at::Device device = tensors[0].device();
  for (const auto& t : tensors)
    TORCH_CHECK(
        t.device() == device,
        "smddp: ",
        op,
        " got tensors on ",
        device,
        " and on ",
        t.device(),
        "; all tensors of one call must be on the same device");
  checkDevice(device, op);
  return device;
}

void checkSameDtype(const std::vector<at::Tensor>& tensors, const char* op) {
  for (const auto& t : tensors)
    TORCH_CHECK(
        t.scalar_type() == tensors[0].scalar_type(),
        "smddp: ",
        op,
        " got tensors of dtypes ",
        dtypeName(tensors[0].scalar_type()),
        " and ",
        dtypeName(t.scalar_type()),
        "; they must all be the same");
}

// The coalesced tensor forms: as many outputs as inputs, each pair of one
// dtype, the larger of each pair (the output when outputsLarger) size times
// the other.  Returns the pairs' libsmddp dtypes.
std::vector<Dtype> checkCoalescedPairs(
    const std::vector<at::Tensor>& outputs,
    const std::vector<at::Tensor>& inputs,
    bool outputsLarger,
    int size,
    const char* op) {
  TORCH_CHECK_VALUE(
      outputs.size() == inputs.size(),
      "smddp: ",
      op,
      ": ",
      outputs.size(),
      " outputs for ",
      inputs.size(),
      " inputs");
  std::vector<Dtype> dts;
  for (size_t i = 0; i < inputs.size(); i++) {
    checkSameDtype({outputs[i], inputs[i]}, op);
    const at::Tensor& large = outputsLarger ? outputs[i] : inputs[i];
    const at::Tensor& small = outputsLarger ? inputs[i] : outputs[i];
    TORCH_CHECK_VALUE(
        large.numel() == small.numel() * size,
        "smddp: ",
        op,
        outputsLarger ? ": output " : ": input ",
        i,
        " has ",
        large.numel(),
        " elements, not ",
        size,
        " x ",
        small.numel());
    dts.push_back(toSmddpDtype(inputs[i].scalar_type(), op));
  }
  return dts;
}

size_t countOf(const at::Tensor& t, const Dtype& dt) {
  return static_cast<size_t>(t.numel()) * dt.lanes;
}

// The contiguous tensor a library call reads or writes in place of t: t
// itself, or a copy (copied back by copyBack()).
at::Tensor staged(const at::Tensor& t) {
  return t.is_contiguous() ? t : t.contiguous();
}

void copyBack(const at::Tensor& user, const at::Tensor& data) {
  if (!data.is_same(user))
    user.copy_(data.view(user.sizes()));
}

// The contiguous tensor a library call writes in place of t: t itself, or
// a new one (copied into t by copyBack()).
at::Tensor receiveBuffer(const at::Tensor& t) {
  return t.is_contiguous() ? t : at::empty_like(t, at::MemoryFormat::Contiguous);
}

size_t unitsOf(const at::Tensor& t, const Moved& mv) {
  return static_cast<size_t>(t.numel()) * mv.units;
}

// t's elements as a flat tensor of bytes (a copy where t is not contiguous).
at::Tensor bytesOf(const at::Tensor& t) {
  return t.contiguous().reshape({-1}).view(at::kByte);
}

// Fills t with the bytes of bytesOf() of a tensor of its dtype and shape.
void fillFromBytes(const at::Tensor& t, const at::Tensor& bytes) {
  at::Tensor dst = receiveBuffer(t);
  dst.reshape({-1}).view(at::kByte).copy_(bytes);
  copyBack(t, dst);
}

// For a PREMUL_SUM: the contiguous input multiplied by the factor, in a new
// tensor (the caller's input is left as it is, as NCCL does).
at::Tensor premultiplied(const at::Tensor& data, const Reduction& red) {
  if (red.factorTensor)
    return data.mul(red.factorTensor->to(data.options()).reshape({})).contiguous();
  return data.mul(red.factor).contiguous();
}

// Output buffers every rank's part of which has numel elements, flattened.
at::Tensor flatOf(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> flat;
  flat.reserve(tensors.size());
  for (const auto& t : tensors)
    flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

void checkRoot(int64_t root, int size, const char* op) {
  TORCH_CHECK_VALUE(
      root >= 0 && root < size,
      "smddp: ",
      op,
      " root rank ",
      root,
      " is not a rank of this group of ",
      size);
}

// The rows (first-dimension entries) of t that go to (or come from) each
// rank: the split sizes, or t's rows divided evenly when there are none.
std::vector<int64_t> rowsPerRank(
    const std::vector<int64_t>& splits,
    const at::Tensor& t,
    int size,
    const char* which) {
  if (splits.empty()) {
    TORCH_CHECK_VALUE(
        t.dim() > 0 && t.size(0) % size == 0,
        "smddp: all_to_all_single: the ",
        which,
        " tensor's first dimension (",
        (t.dim() > 0 ? t.size(0) : 0),
        ") does not split evenly over ",
        size,
        " ranks; pass ",
        which,
        "_split_sizes");
    return std::vector<int64_t>(size, t.size(0) / size);
  }
  TORCH_CHECK_VALUE(
      static_cast<int>(splits.size()) == size,
      "smddp: all_to_all_single: ",
      which,
      "_split_sizes has ",
      splits.size(),
      " entries for a group of ",
      size);
  int64_t sum = 0;
  for (int64_t s : splits) {
    TORCH_CHECK_VALUE(
        s >= 0, "smddp: all_to_all_single: ", which, "_split_sizes has a negative entry");
    sum += s;
  }
  TORCH_CHECK_VALUE(
      t.dim() > 0 && sum == t.size(0),
      "smddp: all_to_all_single: ",
      which,
      "_split_sizes add up to ",
      sum,
      ", not to the first dimension of the ",
      which,
      " tensor (",
      (t.dim() > 0 ? t.size(0) : 0),
      ")");
  return splits;
}

// Elements of one row of t (the product of its sizes after the first).
int64_t rowNumel(const at::Tensor& t) {
  int64_t n = 1;
  for (int64_t d = 1; d < t.dim(); d++)
    n *= t.size(d);
  return n;
}

// Library counts and displacements of smddp_alltoallv, in library elements.
struct Blocks {
  std::vector<size_t> counts, displs;
};

Blocks blocksOf(const std::vector<int64_t>& sizes, size_t unitsPerEntry) {
  Blocks b;
  size_t offset = 0;
  for (int64_t s : sizes) {
    b.counts.push_back(static_cast<size_t>(s) * unitsPerEntry);
    b.displs.push_back(offset);
    offset += b.counts.back();
  }
  return b;
}

void checkPeer(int peer, int size, const char* op, const char* what) {
  TORCH_CHECK_VALUE(
      peer >= 0 && peer < size,
      "smddp: ",
      op,
      ": ",
      what,
      " rank ",
      peer,
      " is not a rank of this group of ",
      size);
}

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

// The header of a sparse tensor that every rank shares before its data:
// nnz, then what must be the same on every rank (sparse and dense
// dimensions, dtype, sizes).
constexpr int kSparseMaxDims = 32;
constexpr int kSparseMeta = 4 + kSparseMaxDims;

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

  smddp_unique_id id = rendezvous(*store);

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
}

smddp_unique_id ProcessGroupSMDDP::rendezvous(c10d::Store& store) {
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
      store.set(kIdKey, std::vector<uint8_t>(value.begin(), value.end()));
      throwBackendError("smddp: " + msg);
    }
    std::vector<uint8_t> value(1 + sizeof(id.internal));
    value[0] = 'I';
    std::memcpy(value.data() + 1, id.internal, sizeof(id.internal));
    store.set(kIdKey, value);
    return id;
  }

  std::vector<uint8_t> value;
  try {
    store.wait({kIdKey}, timeout_);
    value = store.get(kIdKey);
  } catch (const c10::Error& e) {
    throwBackendError(
        "smddp: " + state_->who() + " waited " + std::to_string(timeout_.count()) +
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
      kIdKey,
      "' (",
      value.size(),
      " bytes); is another program using the same store prefix?");
  std::memcpy(id.internal, value.data() + 1, sizeof(id.internal));
  return id;
}

c10::intrusive_ptr<c10d::Backend::Options> ProcessGroupSMDDP::getBackendOptions() {
  return c10::make_intrusive<c10d::Backend::Options>("smddp", timeout_);
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
      timeout.count() > 0 ? timeout : timeout_,
      seq_ + 1,
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
    std::vector<c10::intrusive_ptr<WorkSMDDP>> members) {
  auto work = makeWork(type, name, device, std::move(outputs), timeout, std::move(body));
  work->setMembers(std::move(members));
  queue_->enqueue(work, device.is_cuda() ? touched : std::vector<at::Tensor>());
  ++seq_;
  return work;
}

// ---- collectives -----------------------------------------------------------

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::allreduce(
    std::vector<at::Tensor>& tensors,
    const c10d::AllreduceOptions& opts) {
  const char* op = "allreduce";
  if (tensors.size() != 1)
    throwNotSupported("allreduce of several tensors per process (a list of " +
                      std::to_string(tensors.size()) + ")");
  if (tensors[0].defined() && tensors[0].is_sparse())
    return sparseAllreduce(tensors[0], opts);
  at::Device device = deviceOf(tensors, op);
  at::Tensor t = tensors[0];
  Dtype dt = toSmddpDtype(t.scalar_type(), op);
  Reduction red = toSmddpReduction(opts.reduceOp, dt, op);
  auto body = [t, dt, red](RunContext& ctx) {
    at::Tensor data = staged(t);
    at::Tensor src = red.premul ? premultiplied(data, red) : data;
    ctx.check(
        smddp_allreduce(src.data_ptr(), data.data_ptr(), countOf(data, dt), dt.dtype, red.op,
                        ctx.comm, ctx.stream),
        "smddp_allreduce");
    copyBack(t, data);
  };
  return enqueue(c10d::OpType::ALLREDUCE, op, device, {t}, {t}, opts.timeout, std::move(body));
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
  auto body = [ts, dts, reds, sameDtype](RunContext& ctx) {
    if (sameDtype) {
      // One call over a flat copy of all of them.
      at::Tensor flat = flatOf(ts);
      at::Tensor src = reds[0].premul ? premultiplied(flat, reds[0]) : flat;
      ctx.check(
          smddp_allreduce(src.data_ptr(), flat.data_ptr(), countOf(flat, dts[0]),
                          dts[0].dtype, reds[0].op, ctx.comm, ctx.stream),
          "smddp_allreduce");
      int64_t offset = 0;
      for (const auto& t : ts) {
        t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
        offset += t.numel();
      }
      return;
    }
    for (size_t i = 0; i < ts.size(); i++) {
      at::Tensor data = staged(ts[i]);
      at::Tensor src = reds[i].premul ? premultiplied(data, reds[i]) : data;
      ctx.check(
          smddp_allreduce(src.data_ptr(), data.data_ptr(), countOf(data, dts[i]),
                          dts[i].dtype, reds[i].op, ctx.comm, ctx.stream),
          "smddp_allreduce");
      copyBack(ts[i], data);
    }
  };
  return enqueue(
      c10d::OpType::ALLREDUCE_COALESCED, op, device, ts, ts, opts.timeout, std::move(body));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::broadcast(
    std::vector<at::Tensor>& tensors,
    const c10d::BroadcastOptions& opts) {
  const char* op = "broadcast";
  if (tensors.size() != 1)
    throwNotSupported("broadcast of several tensors per process (a list of " +
                      std::to_string(tensors.size()) + ")");
  TORCH_CHECK_VALUE(opts.rootTensor == 0, "smddp: broadcast: rootTensor must be 0");
  checkRoot(opts.rootRank, size_, op);
  at::Device device = deviceOf(tensors, op);
  at::Tensor t = tensors[0];
  Dtype dt = toSmddpDtype(t.scalar_type(), op);
  int root = static_cast<int>(opts.rootRank);
  bool isRoot = root == rank_;
  auto body = [t, dt, root, isRoot](RunContext& ctx) {
    at::Tensor data = staged(t);
    ctx.check(
        smddp_broadcast(data.data_ptr(), countOf(data, dt), dt.dtype, root, ctx.comm, ctx.stream),
        "smddp_broadcast");
    if (!isRoot)
      copyBack(t, data);
  };
  return enqueue(c10d::OpType::BROADCAST, op, device, {t}, {t}, opts.timeout, std::move(body));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::reduce(
    std::vector<at::Tensor>& tensors,
    const c10d::ReduceOptions& opts) {
  const char* op = "reduce";
  if (tensors.size() != 1)
    throwNotSupported("reduce of several tensors per process (a list of " +
                      std::to_string(tensors.size()) + ")");
  TORCH_CHECK_VALUE(opts.rootTensor == 0, "smddp: reduce: rootTensor must be 0");
  checkRoot(opts.rootRank, size_, op);
  at::Device device = deviceOf(tensors, op);
  at::Tensor t = tensors[0];
  Dtype dt = toSmddpDtype(t.scalar_type(), op);
  Reduction red = toSmddpReduction(opts.reduceOp, dt, op);
  int root = static_cast<int>(opts.rootRank);
  bool isRoot = root == rank_;
  auto body = [t, dt, red, root, isRoot](RunContext& ctx) {
    at::Tensor data = staged(t);
    at::Tensor src = red.premul ? premultiplied(data, red) : data;
    ctx.check(
        smddp_reduce(src.data_ptr(), data.data_ptr(), countOf(data, dt), dt.dtype, red.op, root,
                     ctx.comm, ctx.stream),
        "smddp_reduce");
    if (isRoot)
      copyBack(t, data);
  };
  return enqueue(c10d::OpType::REDUCE, op, device, {t}, {t}, opts.timeout, std::move(body));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::allgather(
    std::vector<std::vector<at::Tensor>>& outputs,
    std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const char* op = "allgather";
  if (inputs.size() != 1 || outputs.size() != 1)
    throwNotSupported("allgather of several tensors per process");
  std::vector<at::Tensor> outs = outputs[0];
  TORCH_CHECK_VALUE(
      static_cast<int>(outs.size()) == size_,
      "smddp: allgather: the output list has ",
      outs.size(),
      " tensors for a group of ",
      size_);
  at::Tensor in = inputs[0];
  std::vector<at::Tensor> all = outs;
  all.push_back(in);
  at::Device device = deviceOf(all, op);
  checkSameDtype(all, op);
  for (const auto& o : outs)
    TORCH_CHECK_VALUE(
        o.numel() == in.numel(),
        "smddp: allgather: an output tensor has ",
        o.numel(),
        " elements, the input ",
        in.numel());
  Dtype dt = toSmddpDtype(in.scalar_type(), op);
  int size = size_;
  auto body = [in, outs, dt, size](RunContext& ctx) {
    at::Tensor src = staged(in);
    at::Tensor flat = at::empty({size * in.numel()}, in.options());
    ctx.check(
        smddp_allgather(src.data_ptr(), flat.data_ptr(), countOf(src, dt), dt.dtype, ctx.comm,
                        ctx.stream),
        "smddp_allgather");
    for (int r = 0; r < size; r++)
      outs[r].copy_(flat.narrow(0, r * in.numel(), in.numel()).view(outs[r].sizes()));
  };
  return enqueue(c10d::OpType::ALLGATHER, op, device, outs, all, opts.timeout, std::move(body));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::_allgather_base(
    at::Tensor& output,
    at::Tensor& input,
    const c10d::AllgatherOptions& opts) {
  const char* op = "all_gather_into_tensor";
  at::Device device = deviceOf({output, input}, op);
  checkSameDtype({output, input}, op);
  TORCH_CHECK_VALUE(
      output.numel() == input.numel() * size_,
      "smddp: all_gather_into_tensor: the output has ",
      output.numel(),
      " elements, not ",
      size_,
      " x ",
      input.numel());
  Dtype dt = toSmddpDtype(input.scalar_type(), op);
  at::Tensor in = input, out = output;
  auto body = [in, out, dt](RunContext& ctx) {
    at::Tensor src = staged(in);
    at::Tensor dst = staged(out);
    ctx.check(
        smddp_allgather(src.data_ptr(), dst.data_ptr(), countOf(src, dt), dt.dtype, ctx.comm,
                        ctx.stream),
        "smddp_allgather");
    copyBack(out, dst);
  };
  return enqueue(
      c10d::OpType::_ALLGATHER_BASE, op, device, {out}, {out, in}, opts.timeout, std::move(body));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs,
    std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const char* op = "allgather_into_tensor_coalesced";
  std::vector<at::Tensor> all = outputs;
  all.insert(all.end(), inputs.begin(), inputs.end());
  at::Device device = deviceOf(all, op);
  std::vector<Dtype> dts = checkCoalescedPairs(outputs, inputs, true, size_, op);
  std::vector<at::Tensor> ins = inputs, outs = outputs;
  auto body = [ins, outs, dts](RunContext& ctx) {
    for (size_t i = 0; i < ins.size(); i++) {
      at::Tensor src = staged(ins[i]);
      at::Tensor dst = staged(outs[i]);
      ctx.check(
          smddp_allgather(src.data_ptr(), dst.data_ptr(), countOf(src, dts[i]), dts[i].dtype,
                          ctx.comm, ctx.stream),
          "smddp_allgather");
      copyBack(outs[i], dst);
    }
  };
  return enqueue(
      c10d::OpType::COALESCED, op, device, outs, all, opts.timeout,
      std::move(body));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::reduce_scatter(
    std::vector<at::Tensor>& outputs,
    std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const char* op = "reduce_scatter";
  if (outputs.size() != 1 || inputs.size() != 1)
    throwNotSupported("reduce_scatter of several tensors per process");
  std::vector<at::Tensor> ins = inputs[0];
  TORCH_CHECK_VALUE(
      static_cast<int>(ins.size()) == size_,
      "smddp: reduce_scatter: the input list has ",
      ins.size(),
      " tensors for a group of ",
      size_);
  at::Tensor out = outputs[0];
  std::vector<at::Tensor> all = ins;
  all.push_back(out);
  at::Device device = deviceOf(all, op);
  checkSameDtype(all, op);
  for (const auto& in : ins)
    TORCH_CHECK_VALUE(
        in.numel() == out.numel(),
        "smddp: reduce_scatter: an input tensor has ",
        in.numel(),
        " elements, the output ",
        out.numel());
  Dtype dt = toSmddpDtype(out.scalar_type(), op);
  Reduction red = toSmddpReduction(opts.reduceOp, dt, op);
  auto body = [ins, out, dt, red](RunContext& ctx) {
    at::Tensor flat = flatOf(ins);
    at::Tensor src = red.premul ? premultiplied(flat, red) : flat;
    at::Tensor dst = staged(out);
    ctx.check(
        smddp_reduce_scatter(src.data_ptr(), dst.data_ptr(), countOf(dst, dt), dt.dtype, red.op,
                             ctx.comm, ctx.stream),
        "smddp_reduce_scatter");
    copyBack(out, dst);
  };
  return enqueue(
      c10d::OpType::REDUCE_SCATTER, op, device, {out}, all, opts.timeout, std::move(body));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::_reduce_scatter_base(
    at::Tensor& output,
    at::Tensor& input,
    const c10d::ReduceScatterOptions& opts) {
  const char* op = "reduce_scatter_tensor";
  at::Device device = deviceOf({output, input}, op);
  checkSameDtype({output, input}, op);
  TORCH_CHECK_VALUE(
      input.numel() == output.numel() * size_,
      "smddp: reduce_scatter_tensor: the input has ",
      input.numel(),
      " elements, not ",
      size_,
      " x ",
      output.numel());
  Dtype dt = toSmddpDtype(output.scalar_type(), op);
  Reduction red = toSmddpReduction(opts.reduceOp, dt, op);
  at::Tensor in = input, out = output;
  auto body = [in, out, dt, red](RunContext& ctx) {
    at::Tensor src = staged(in);
    if (red.premul)
      src = premultiplied(src, red);
    at::Tensor dst = staged(out);
    ctx.check(
        smddp_reduce_scatter(src.data_ptr(), dst.data_ptr(), countOf(dst, dt), dt.dtype, red.op,
                             ctx.comm, ctx.stream),
        "smddp_reduce_scatter");
    copyBack(out, dst);
  };
  return enqueue(
      c10d::OpType::_REDUCE_SCATTER_BASE, op, device, {out}, {out, in}, opts.timeout,
      std::move(body));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs,
    std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const char* op = "reduce_scatter_tensor_coalesced";
  std::vector<at::Tensor> all = outputs;
  all.insert(all.end(), inputs.begin(), inputs.end());
  at::Device device = deviceOf(all, op);
  std::vector<Dtype> dts = checkCoalescedPairs(outputs, inputs, false, size_, op);
  std::vector<Reduction> reds;
  for (const Dtype& dt : dts)
    reds.push_back(toSmddpReduction(opts.reduceOp, dt, op));
  std::vector<at::Tensor> ins = inputs, outs = outputs;
  auto body = [ins, outs, dts, reds](RunContext& ctx) {
    for (size_t i = 0; i < ins.size(); i++) {
      at::Tensor src = staged(ins[i]);
      if (reds[i].premul)
        src = premultiplied(src, reds[i]);
      at::Tensor dst = staged(outs[i]);
      ctx.check(
          smddp_reduce_scatter(src.data_ptr(), dst.data_ptr(), countOf(dst, dts[i]),
                               dts[i].dtype, reds[i].op, ctx.comm, ctx.stream),
          "smddp_reduce_scatter");
      copyBack(outs[i], dst);
    }
  };
  return enqueue(
      c10d::OpType::COALESCED, op, device, outs, all, opts.timeout,
      std::move(body));
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
  // Equal blocks both ways: the plain all-to-all (MoE's uneven splits take
  // smddp_alltoallv).
  bool even = std::all_of(send.counts.begin(), send.counts.end(),
                          [&](size_t c) { return c == send.counts[0]; }) &&
      recv.counts == send.counts;
  at::Tensor in = input, out = output;
  auto body = [in, out, mv, send, recv, even](RunContext& ctx) {
    at::Tensor src = staged(in);
    at::Tensor dst = receiveBuffer(out);
    if (src.numel() > 0 && src.data_ptr() == dst.data_ptr())
      src = src.clone(); // the library's all-to-all is not in place
    if (even)
      ctx.check(
          smddp_alltoall(src.data_ptr(), dst.data_ptr(), send.counts[0], mv.dtype, ctx.comm,
                         ctx.stream),
          "smddp_alltoall");
    else
      ctx.check(
          smddp_alltoallv(src.data_ptr(), send.counts.data(), send.displs.data(), dst.data_ptr(),
                          recv.counts.data(), recv.displs.data(), mv.dtype, ctx.comm,
                          ctx.stream),
          "smddp_alltoallv");
    copyBack(out, dst);
  };
  return enqueue(
      c10d::OpType::ALLTOALL_BASE, op, device, {out}, {out, in}, opts.timeout, std::move(body));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::barrier(const c10d::BarrierOptions& opts) {
  // A host barrier, run after the work queued before it (device work
  // included: the library call of each returned before the next starts).
  auto body = [](RunContext& ctx) { ctx.check(smddp_barrier(ctx.comm), "smddp_barrier"); };
  return enqueue(
      c10d::OpType::BARRIER, "barrier", at::Device(at::kCPU), {}, {}, opts.timeout,
      std::move(body));
}

// ---- sparse all-reduce ------------------------------------------------------

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::allreduce_sparse(
    std::vector<at::Tensor>& tensors,
    const c10d::AllreduceOptions& opts) {
  if (tensors.size() != 1)
    throwNotSupported("allreduce of several tensors per process (a list of " +
                      std::to_string(tensors.size()) + ")");
  if (!tensors[0].defined() || !tensors[0].is_sparse())
    return allreduce(tensors, opts);
  return sparseAllreduce(tensors[0], opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::sparseAllreduce(
    const at::Tensor& tensor,
    const c10d::AllreduceOptions& opts) {
  const char* op = "allreduce of sparse tensors";
  TORCH_CHECK_VALUE(
      opts.reduceOp == c10d::ReduceOp::SUM,
      "smddp: ",
      op,
      " supports ReduceOp.SUM only (as gloo), not ",
      reduceOpName(opts.reduceOp));
  at::Device device = tensor.device();
  checkDevice(device, op);
  TORCH_CHECK_VALUE(
      tensor.dim() <= kSparseMaxDims,
      "smddp: ",
      op,
      ": ",
      tensor.dim(),
      " dimensions, more than the ",
      kSparseMaxDims,
      " supported");
  at::Tensor t = tensor;
  int size = size_;
  auto body = [t, size](RunContext& ctx) {
    at::Tensor in = t.coalesce();
    at::Tensor idx = in._indices().contiguous(); // int64 [sparse_dim, nnz]
    at::Tensor val = in._values().contiguous();  // [nnz, dense sizes...]
    int64_t nnz = in._nnz();

    // The header first (on the host: nnz is host metadata), so that every
    // rank knows the others' nnz and checks their shapes against its own.
    at::Tensor meta = at::full({kSparseMeta}, -1, at::kLong);
    int64_t* m = meta.data_ptr<int64_t>();
    m[0] = nnz;
    m[1] = in.sparse_dim();
    m[2] = in.dense_dim();
    m[3] = static_cast<int64_t>(in.scalar_type());
    for (int64_t d = 0; d < in.dim(); d++)
      m[4 + d] = in.size(d);
    at::Tensor metas = at::empty({size, kSparseMeta}, at::kLong);
    ctx.check(
        smddp_allgather(meta.data_ptr(), metas.data_ptr(), kSparseMeta, SMDDP_INT64, ctx.comm,
                        nullptr),
        "smddp_allgather");
    const int64_t* all = metas.data_ptr<int64_t>();
    int64_t maxNnz = 0;
    for (int r = 0; r < size; r++) {
      const int64_t* their = all + r * kSparseMeta;
      if (!std::equal(m + 1, m + kSparseMeta, their + 1)) {
        // Every rank has the same table and fails alike: the group stays
        // in step and usable.
        ctx.recoverable = true;
        TORCH_CHECK_VALUE(
            false,
            "smddp: allreduce of sparse tensors: rank ",
            r,
            " passed a tensor of another shape, dtype or number of sparse dimensions "
            "than rank ",
            ctx.state.rank,
            " (",
            in.sizes(),
            ", ",
            dtypeName(in.scalar_type()),
            ", ",
            in.sparse_dim(),
            " sparse dimensions)");
      }
      maxNnz = std::max(maxNnz, their[0]);
    }

    // Indices and values padded to the largest nnz, then all-gathered.
    at::Tensor pidx = at::zeros({in.sparse_dim(), maxNnz}, idx.options());
    pidx.narrow(1, 0, nnz).copy_(idx);
    std::vector<int64_t> vsizes = val.sizes().vec();
    vsizes[0] = maxNnz;
    at::Tensor pval = at::zeros(vsizes, val.options());
    pval.narrow(0, 0, nnz).copy_(val);
    at::Tensor gidx = at::empty({size, in.sparse_dim(), maxNnz}, idx.options());
    std::vector<int64_t> gsizes = vsizes;
    gsizes.insert(gsizes.begin(), size);
    at::Tensor gval = at::empty(gsizes, val.options());
    ctx.check(
        smddp_allgather(pidx.data_ptr(), gidx.data_ptr(), static_cast<size_t>(pidx.numel()),
                        SMDDP_INT64, ctx.comm, ctx.stream),
        "smddp_allgather");
    Moved mv = movedAs(val.scalar_type());
    ctx.check(
        smddp_allgather(pval.data_ptr(), gval.data_ptr(), unitsOf(pval, mv), mv.dtype, ctx.comm,
                        ctx.stream),
        "smddp_allgather");

    // Summed as gloo sums them: rank by rank, then coalesced.
    at::Tensor sum;
    for (int r = 0; r < size; r++) {
      int64_t n = all[r * kSparseMeta];
      at::Tensor part = at::sparse_coo_tensor(
          gidx[r].narrow(1, 0, n), gval[r].narrow(0, 0, n), in.sizes(), in.options());
      if (r == 0)
        sum = part;
      else
        sum.add_(part);
    }
    t.copy_(sum.coalesce());
  };
  return enqueue(c10d::OpType::ALLREDUCE, op, device, {t}, {}, opts.timeout, std::move(body));
}

// ---- list forms, gather, scatter, all-to-all ---------------------------------

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputTensorLists,
    std::vector<at::Tensor>& inputTensors,
    const c10d::AllgatherOptions& opts) {
  const char* op = "all_gather_coalesced";
  TORCH_CHECK_VALUE(!inputTensors.empty(), "smddp: ", op, " got no input tensors");
  TORCH_CHECK_VALUE(
      static_cast<int>(outputTensorLists.size()) == size_,
      "smddp: ",
      op,
      ": ",
      outputTensorLists.size(),
      " output lists for a group of ",
      size_);
  std::vector<at::Tensor> all = inputTensors;
  for (const auto& list : outputTensorLists) {
    TORCH_CHECK_VALUE(
        list.size() == inputTensors.size(),
        "smddp: ",
        op,
        ": an output list has ",
        list.size(),
        " tensors for ",
        inputTensors.size(),
        " inputs");
    for (size_t i = 0; i < list.size(); i++) {
      TORCH_CHECK_VALUE(
          list[i].defined() && list[i].scalar_type() == inputTensors[i].scalar_type() &&
              list[i].sizes() == inputTensors[i].sizes(),
          "smddp: ",
          op,
          ": output tensor ",
          i,
          " of a list does not have the dtype and shape of input ",
          i);
      all.push_back(list[i]);
    }
  }
  at::Device device = deviceOf(all, op);
  std::vector<at::Tensor> ins = inputTensors;
  std::vector<std::vector<at::Tensor>> outs = outputTensorLists;
  std::vector<at::Tensor> results;
  for (const auto& list : outs)
    results.insert(results.end(), list.begin(), list.end());
  int size = size_;
  // One all-gather of every input's bytes, whatever their dtypes.
  auto body = [ins, outs, size](RunContext& ctx) {
    std::vector<at::Tensor> bytes;
    for (const auto& t : ins)
      bytes.push_back(bytesOf(t));
    at::Tensor flat = at::cat(bytes);
    int64_t block = flat.numel();
    at::Tensor gathered = at::empty({size * block}, flat.options());
    ctx.check(
        smddp_allgather(flat.data_ptr(), gathered.data_ptr(), static_cast<size_t>(block),
                        SMDDP_UINT8, ctx.comm, ctx.stream),
        "smddp_allgather");
    for (int r = 0; r < size; r++) {
      int64_t offset = r * block;
      for (size_t i = 0; i < ins.size(); i++) {
        fillFromBytes(outs[r][i], gathered.narrow(0, offset, bytes[i].numel()));
        offset += bytes[i].numel();
      }
    }
  };
  return enqueue(
      c10d::OpType::ALLGATHER_COALESCED, op, device, results, all, opts.timeout, std::move(body));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::gather(
    std::vector<std::vector<at::Tensor>>& outputs,
    std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  const char* op = "gather";
  checkRoot(opts.rootRank, size_, op);
  TORCH_CHECK_VALUE(inputs.size() == 1, "smddp: gather takes one input tensor, not ", inputs.size());
  int root = static_cast<int>(opts.rootRank);
  bool isRoot = root == rank_;
  at::Tensor in = inputs[0];
  std::vector<at::Tensor> outs;
  if (isRoot) {
    TORCH_CHECK_VALUE(
        outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
        "smddp: gather: the root needs one list of ",
        size_,
        " output tensors");
    outs = outputs[0];
    for (const auto& o : outs)
      TORCH_CHECK_VALUE(
          o.defined() && o.numel() == in.numel(),
          "smddp: gather: an output tensor has ",
          (o.defined() ? o.numel() : 0),
          " elements, the input ",
          in.numel());
  } else {
    TORCH_CHECK_VALUE(
        outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
        "smddp: gather: only the root (rank ",
        root,
        ") takes output tensors");
  }
  std::vector<at::Tensor> all = outs;
  all.push_back(in);
  at::Device device = deviceOf(all, op);
  checkSameDtype(all, op);
  Moved mv = movedAs(in.scalar_type());
  int size = size_;
  auto body = [in, outs, mv, root, isRoot, size](RunContext& ctx) {
    at::Tensor src = staged(in);
    size_t count = unitsOf(src, mv);
    at::Tensor flat = isRoot ? at::empty({size * in.numel()}, in.options()) : src;
    ctx.check(
        smddp_gather(src.data_ptr(), flat.data_ptr(), count, mv.dtype, root, ctx.comm,
                     ctx.stream),
        "smddp_gather");
    if (isRoot)
      for (int r = 0; r < size; r++)
        outs[r].copy_(flat.narrow(0, r * in.numel(), in.numel()).view(outs[r].sizes()));
  };
  return enqueue(c10d::OpType::GATHER, op, device, outs, all, opts.timeout, std::move(body));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::scatter(
    std::vector<at::Tensor>& outputs,
    std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  const char* op = "scatter";
  checkRoot(opts.rootRank, size_, op);
  TORCH_CHECK_VALUE(
      outputs.size() == 1, "smddp: scatter takes one output tensor, not ", outputs.size());
  int root = static_cast<int>(opts.rootRank);
  bool isRoot = root == rank_;
  at::Tensor out = outputs[0];
  std::vector<at::Tensor> ins;
  if (isRoot) {
    TORCH_CHECK_VALUE(
        inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
        "smddp: scatter: the root needs one list of ",
        size_,
        " input tensors");
    ins = inputs[0];
    for (const auto& i : ins)
      TORCH_CHECK_VALUE(
          i.defined() && i.numel() == out.numel(),
          "smddp: scatter: an input tensor has ",
          (i.defined() ? i.numel() : 0),
          " elements, the output ",
          out.numel());
  } else {
    TORCH_CHECK_VALUE(
        inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
        "smddp: scatter: only the root (rank ",
        root,
        ") takes input tensors");
  }
  std::vector<at::Tensor> all = ins;
  all.push_back(out);
  at::Device device = deviceOf(all, op);
  checkSameDtype(all, op);
  Moved mv = movedAs(out.scalar_type());
  auto body = [ins, out, mv, root, isRoot](RunContext& ctx) {
    at::Tensor dst = receiveBuffer(out);
    at::Tensor flat = isRoot ? flatOf(ins) : dst;
    ctx.check(
        smddp_scatter(flat.data_ptr(), dst.data_ptr(), unitsOf(dst, mv), mv.dtype, root,
                      ctx.comm, ctx.stream),
        "smddp_scatter");
    copyBack(out, dst);
  };
  return enqueue(c10d::OpType::SCATTER, op, device, {out}, all, opts.timeout, std::move(body));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::alltoall(
    std::vector<at::Tensor>& outputs,
    std::vector<at::Tensor>& inputs,
    const c10d::AllToAllOptions& opts) {
  const char* op = "all_to_all";
  TORCH_CHECK_VALUE(
      static_cast<int>(inputs.size()) == size_ && static_cast<int>(outputs.size()) == size_,
      "smddp: all_to_all: ",
      inputs.size(),
      " input and ",
      outputs.size(),
      " output tensors for a group of ",
      size_,
      "; one of each per rank");
  std::vector<at::Tensor> all = outputs;
  all.insert(all.end(), inputs.begin(), inputs.end());
  at::Device device = deviceOf(all, op);
  checkSameDtype(all, op);
  Moved mv = movedAs(inputs[0].scalar_type());
  std::vector<int64_t> sendSizes, recvSizes;
  for (const auto& t : inputs)
    sendSizes.push_back(t.numel());
  for (const auto& t : outputs)
    recvSizes.push_back(t.numel());
  Blocks send = blocksOf(sendSizes, mv.units);
  Blocks recv = blocksOf(recvSizes, mv.units);
  std::vector<at::Tensor> ins = inputs, outs = outputs;
  auto body = [ins, outs, mv, send, recv](RunContext& ctx) {
    at::Tensor src = flatOf(ins);
    int64_t total = 0;
    for (const auto& o : outs)
      total += o.numel();
    at::Tensor dst = at::empty({total}, src.options());
    ctx.check(
        smddp_alltoallv(src.data_ptr(), send.counts.data(), send.displs.data(), dst.data_ptr(),
                        recv.counts.data(), recv.displs.data(), mv.dtype, ctx.comm, ctx.stream),
        "smddp_alltoallv");
    int64_t offset = 0;
    for (const auto& o : outs) {
      o.copy_(dst.narrow(0, offset, o.numel()).view(o.sizes()));
      offset += o.numel();
    }
  };
  return enqueue(c10d::OpType::ALLTOALL, op, device, outs, all, opts.timeout, std::move(body));
}

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
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::endCoalescing() {
  TORCH_CHECK(coalescing_, "smddp: endCoalescing on ", state_->who(), " without startCoalescing");
  coalescing_ = false;
  std::vector<P2POp> ops = std::move(batch_);
  batch_.clear();
  if (ops.empty())
    return nullptr; // nothing was batched (as ProcessGroupNCCL)
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
  auto made = std::make_shared<smddp_comm*>(nullptr);
  auto body = [color, key, made](RunContext& ctx) {
    ctx.check(smddp_comm_split(ctx.comm, color, key, made.get()), "smddp_comm_split");
  };
  auto work = enqueue(
      c10d::OpType::UNKNOWN, op, at::Device(at::kCPU), {}, {}, std::chrono::milliseconds(0),
      std::move(body));
  work->wait();
  if (color < 0)
    return nullptr;
  smddp_comm* comm = *made;
  TORCH_CHECK(comm != nullptr, "smddp: split_group: smddp_comm_split made no communicator");
  TORCH_CHECK(
      smddp_comm_rank(comm) == key && smddp_comm_size(comm) == static_cast<int>(ranks.size()),
      "smddp: split_group: the new communicator has this rank as ",
      smddp_comm_rank(comm),
      " of ",
      smddp_comm_size(comm),
      ", not ",
      key,
      " of ",
      ranks.size());
  std::chrono::milliseconds timeout =
      opts && opts->timeout.count() > 0 ? opts->timeout : timeout_;
  c10::intrusive_ptr<c10d::Backend> child = c10::make_intrusive<ProcessGroupSMDDP>(
      comm, key, static_cast<int>(ranks.size()), timeout);
  splitMade_ = c10::weak_intrusive_ptr<c10d::Backend>(child);
  return child;
}

// ---- bookkeeping and tear-down ---------------------------------------------------

void ProcessGroupSMDDP::setSequenceNumberForGroup() {}

uint64_t ProcessGroupSMDDP::getSequenceNumberForGroup() {
  return seq_;
}

void ProcessGroupSMDDP::shutdown() {
  queue_->stop(false);
}

void ProcessGroupSMDDP::abort() {
  queue_->stop(true);
}

} // namespace smddp_torch
