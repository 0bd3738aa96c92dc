// Tensors.cpp - the backend's argument checks and the tensors a library
// call reads or writes in place of the caller's (declared in Tensors.hpp).
#include "Tensors.hpp"

#include <string>

#include <c10/util/Exception.h>

namespace smddp_torch {

std::vector<Io> pairsOf(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs) {
  std::vector<Io> ios;
  ios.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); i++)
    ios.push_back({inputs[i], outputs[i]});
  return ios;
}

void unflatten(const at::Tensor& flat, const std::vector<at::Tensor>& tensors) {
  int64_t offset = 0;
  for (const auto& t : tensors) {
    t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
    offset += t.numel();
  }
}

const at::Tensor& oneTensor(const std::vector<at::Tensor>& tensors, const char* op) {
  TORCH_CHECK_VALUE(!tensors.empty(), "smddp: ", op, " got no tensors");
  if (tensors.size() != 1)
    throwNotSupported(std::string(op) + " of several tensors per process (a list of " +
                      std::to_string(tensors.size()) + ")");
  TORCH_CHECK(tensors[0].defined(), "smddp: ", op, " got an undefined tensor");
  return tensors[0];
}

const std::vector<at::Tensor>& oneList(
    const std::vector<std::vector<at::Tensor>>& lists,
    const char* op) {
  TORCH_CHECK_VALUE(!lists.empty(), "smddp: ", op, " got no tensor lists");
  if (lists.size() != 1)
    throwNotSupported(std::string(op) + " of several tensors per process (" +
                      std::to_string(lists.size()) + " lists)");
  return lists[0];
}

void checkPerRank(const std::vector<at::Tensor>& list, int size, const char* op, const char* which) {
  TORCH_CHECK_VALUE(
      static_cast<int>(list.size()) == size,
      "smddp: ",
      op,
      ": the ",
      which,
      " list has ",
      list.size(),
      " tensors for a group of ",
      size,
      "; one per rank");
}

void checkNumel(
    const std::vector<at::Tensor>& list,
    int64_t numel,
    const char* op,
    const char* which,
    const char* other) {
  for (const auto& t : list)
    TORCH_CHECK_VALUE(
        t.defined() && t.numel() == numel,
        "smddp: ",
        op,
        ": ",
        which,
        " tensor has ",
        (t.defined() ? t.numel() : 0),
        " elements, ",
        other,
        " ",
        numel);
}

std::vector<at::Tensor> rootList(
    const std::vector<std::vector<at::Tensor>>& lists,
    bool isRoot,
    int root,
    int size,
    const char* op,
    const char* which) {
  if (!isRoot) {
    TORCH_CHECK_VALUE(
        lists.empty() || (lists.size() == 1 && lists[0].empty()),
        "smddp: ",
        op,
        ": only the root (rank ",
        root,
        ") takes ",
        which,
        " tensors");
    return {};
  }
  TORCH_CHECK_VALUE(
      lists.size() == 1 && static_cast<int>(lists[0].size()) == size,
      "smddp: ",
      op,
      ": the root needs one list of ",
      size,
      " ",
      which,
      " tensors");
  return lists[0];
}

void checkTensor(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.defined(), "smddp: ", op, " got an undefined tensor");
  if (t.layout() == at::kStrided)
    return;
  std::string layout = t.is_sparse() ? "sparse COO" : c10::str(t.layout());
  if (t.is_sparse_csr())
    layout = "sparse compressed (" + c10::str(t.layout()) + ")";
  throwNotSupported(
      std::string(op) + " on " + layout + " tensors",
      "Pass a dense (strided) tensor (.to_dense()), or " + std::string(kOtherBackendLower));
}

void checkDevice(const at::Device& device, const char* op) {
  if (device.is_cuda()) {
#ifndef SMDDP_TORCH_CUDA
    throwNotSupported(
        std::string(op) + " on CUDA tensors in this build",
        "This smddp torch extension was built without CUDA; reinstall it with a CUDA build "
        "of torch and a CUDA toolkit of torch's major version (CUDA_HOME) present "
        "(SMDDP_TORCH_CUDA=1 makes the build say why it cannot).");
#endif
  } else if (!device.is_cpu()) {
    throwNotSupported(
        std::string(op) + " on " + c10::DeviceTypeName(device.type()) + " tensors",
        "Move the tensors to the CPU or to a CUDA device, or " +
            std::string(kOtherBackendLower));
  }
}

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

void checkCoalescedPairs(
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
  }
}

size_t countOf(const at::Tensor& t, const Dtype& dt) {
  return static_cast<size_t>(t.numel()) * dt.lanes;
}

at::Tensor staged(const at::Tensor& t) {
  return t.is_contiguous() ? t : t.contiguous();
}

void copyBack(const at::Tensor& user, const at::Tensor& data) {
  if (!data.is_same(user))
    user.copy_(data.view(user.sizes()));
}

at::Tensor receiveBuffer(const at::Tensor& t) {
  return t.is_contiguous() ? t : at::empty_like(t, at::MemoryFormat::Contiguous);
}

size_t unitsOf(const at::Tensor& t, const Moved& mv) {
  return static_cast<size_t>(t.numel()) * mv.units;
}

at::Tensor bytesOf(const at::Tensor& t) {
  return t.contiguous().reshape({-1}).view(at::kByte);
}

void fillFromBytes(const at::Tensor& t, const at::Tensor& bytes) {
  at::Tensor dst = receiveBuffer(t);
  dst.reshape({-1}).view(at::kByte).copy_(bytes);
  copyBack(t, dst);
}

at::Tensor premultiplied(const at::Tensor& data, const Reduction& red) {
  if (red.factorTensor)
    return data.mul(red.factorTensor->to(data.options()).reshape({})).contiguous();
  return data.mul(red.factor).contiguous();
}

std::vector<at::Tensor> withFactor(std::vector<at::Tensor> touched, const Reduction& red) {
  if (red.factorTensor && red.factorTensor->defined() && red.factorTensor->is_cuda())
    touched.push_back(*red.factorTensor);
  return touched;
}

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

int64_t rowNumel(const at::Tensor& t) {
  int64_t n = 1;
  for (int64_t d = 1; d < t.dim(); d++)
    n *= t.size(d);
  return n;
}

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

} // namespace smddp_torch
