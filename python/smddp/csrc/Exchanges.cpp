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
  const at::Tensor& t = oneTensor(tensors, "allreduce");
  if (!t.is_sparse())
    return allreduce(tensors, opts);
  return sparseAllreduce(t, opts);
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
  return collective(
      {c10d::OpType::ALLGATHER_COALESCED, op, "smddp_allgather", device, results, all,
       opts.timeout, std::nullopt, false, true, false}, // a Work always (syncOf)
      [ins, size] {
        std::vector<at::Tensor> bytes;
        for (const auto& t : ins)
          bytes.push_back(bytesOf(t));
        at::Tensor flat = at::cat(bytes);
        return std::vector<Io>{{flat, at::empty({size * flat.numel()}, flat.options())}};
      },
      [](RunContext& ctx, size_t, const at::Tensor& src, const at::Tensor& dst) {
        return smddp_allgather(src.data_ptr(), dst.data_ptr(), static_cast<size_t>(src.numel()),
                               SMDDP_UINT8, ctx.comm, ctx.stream);
      },
      [ins, outs, size](RunContext&, const std::vector<at::Tensor>& dsts) {
        int64_t block = dsts[0].numel() / size, offset = 0;
        for (int r = 0; r < size; r++) {
          offset = r * block;
          for (size_t i = 0; i < ins.size(); i++) {
            int64_t n = ins[i].numel() * static_cast<int64_t>(ins[i].element_size());
            fillFromBytes(outs[r][i], dsts[0].narrow(0, offset, n));
            offset += n;
          }
        }
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::gather(
    std::vector<std::vector<at::Tensor>>& outputs,
    std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  const char* op = "gather";
  checkRoot(opts.rootRank, size_, op);
  const at::Tensor& in = oneTensor(inputs, op);
  int root = static_cast<int>(opts.rootRank);
  bool isRoot = root == rank_;
  std::vector<at::Tensor> outs = rootList(outputs, isRoot, root, size_, op, "output");
  checkNumel(outs, in.numel(), op, "an output", "the input");
  std::vector<at::Tensor> all = outs;
  all.push_back(in);
  at::Device device = deviceOf(all, op);
  checkSameDtype(all, op);
  Moved mv = movedAs(in.scalar_type());
  int size = size_;
  return collective(
      {c10d::OpType::GATHER, op, "smddp_gather", device, outs, all, opts.timeout},
      [in, isRoot, size] {
        // Elsewhere than the root the library writes nothing.
        return std::vector<Io>{
            isRoot ? Io{in, at::empty({size * in.numel()}, in.options())} : Io{in, {}, false}};
      },
      [mv, root](RunContext& ctx, size_t, const at::Tensor& src, const at::Tensor& dst) {
        return smddp_gather(src.data_ptr(), dst.data_ptr(), unitsOf(src, mv), mv.dtype, root,
                            ctx.comm, ctx.stream);
      },
      [outs, isRoot](RunContext&, const std::vector<at::Tensor>& dsts) {
        if (isRoot)
          unflatten(dsts[0], outs);
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::scatter(
    std::vector<at::Tensor>& outputs,
    std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  const char* op = "scatter";
  checkRoot(opts.rootRank, size_, op);
  const at::Tensor& out = oneTensor(outputs, op);
  int root = static_cast<int>(opts.rootRank);
  bool isRoot = root == rank_;
  std::vector<at::Tensor> ins = rootList(inputs, isRoot, root, size_, op, "input");
  checkNumel(ins, out.numel(), op, "an input", "the output");
  std::vector<at::Tensor> all = ins;
  all.push_back(out);
  at::Device device = deviceOf(all, op);
  checkSameDtype(all, op);
  Moved mv = movedAs(out.scalar_type());
  return collective(
      {c10d::OpType::SCATTER, op, "smddp_scatter", device, {out}, all, opts.timeout},
      [ins, out, isRoot] {
        // Elsewhere than the root the library reads nothing.
        return std::vector<Io>{isRoot ? Io{flatOf(ins), out} : Io{{}, out}};
      },
      [mv, root](RunContext& ctx, size_t, const at::Tensor& src, const at::Tensor& dst) {
        return smddp_scatter(src.data_ptr(), dst.data_ptr(), unitsOf(dst, mv), mv.dtype, root,
                             ctx.comm, ctx.stream);
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSMDDP::alltoall(
    std::vector<at::Tensor>& outputs,
    std::vector<at::Tensor>& inputs,
    const c10d::AllToAllOptions& opts) {
  const char* op = "all_to_all";
  checkPerRank(inputs, size_, op, "input");
  checkPerRank(outputs, size_, op, "output");
  std::vector<at::Tensor> all = outputs;
  all.insert(all.end(), inputs.begin(), inputs.end());
  at::Device device = deviceOf(all, op);
  checkSameDtype(all, op);
  Moved mv = movedAs(inputs[0].scalar_type());
  std::vector<int64_t> sendSizes, recvSizes;
  int64_t total = 0;
  for (const auto& t : inputs)
    sendSizes.push_back(t.numel());
  for (const auto& t : outputs) {
    recvSizes.push_back(t.numel());
    total += t.numel();
  }
  Blocks send = blocksOf(sendSizes, mv.units);
  Blocks recv = blocksOf(recvSizes, mv.units);
  std::vector<at::Tensor> ins = inputs, outs = outputs;
  return collective(
      {c10d::OpType::ALLTOALL, op, "smddp_alltoallv", device, outs, all, opts.timeout},
      [ins, total] {
        at::Tensor src = flatOf(ins);
        return std::vector<Io>{{src, at::empty({total}, src.options())}};
      },
      [mv, send, recv](RunContext& ctx, size_t, const at::Tensor& src, const at::Tensor& dst) {
        return smddp_alltoallv(src.data_ptr(), send.counts.data(), send.displs.data(),
                               dst.data_ptr(), recv.counts.data(), recv.displs.data(), mv.dtype,
                               ctx.comm, ctx.stream);
      },
      [outs](RunContext&, const std::vector<at::Tensor>& dsts) { unflatten(dsts[0], outs); });
}

} // namespace smddp_torch
