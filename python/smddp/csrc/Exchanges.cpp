// Exchanges.cpp - the "smddp" backend's list forms (the list all-to-all
// among them), gather, scatter and the sparse all-reduce (ProcessGroupSMDDP.hpp).
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

// The header of a sparse tensor that every rank shares before its data:
// nnz, then what must be the same on every rank (sparse and dense
// dimensions, dtype, sizes).
constexpr int kSparseMaxDims = 32;
constexpr int kSparseMeta = 4 + kSparseMaxDims;

} // namespace

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
  // A sparse tensor has no storage of its own to protect (storage()
  // throws): its indices and values, which the side stream reads, are.
  std::vector<at::Tensor> touched;
  if (device.is_cuda())
    touched = {t._indices(), t._values()};
  return enqueue(
      c10d::OpType::ALLREDUCE, op, device, {t}, touched, opts.timeout, std::move(body));
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

} // namespace smddp_torch
