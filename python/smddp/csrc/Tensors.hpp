// Tensors.hpp - the backend's argument checks and the tensors a library
// call reads or writes in place of the caller's (Tensors.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

#include "Types.hpp"

namespace smddp_torch {

// What one library call of the funnel (ProcessGroupSMDDP::collective)
// reads and writes.
struct Io {
  at::Tensor in;       // read; undefined: a pure receive (into out)
  at::Tensor out = {}; // written; undefined: in place (into in)
  bool written = true; // this rank's output takes the result (copied back)
};

// Io {inputs[i], outputs[i]} for each i.
std::vector<Io> pairsOf(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs);

// flat's elements, in order, copied into tensors.
void unflatten(const at::Tensor& flat, const std::vector<at::Tensor>& tensors);

// The argument checks every op shares.  oneTensor, oneList: the one tensor
// (list) of a call that takes one per process; a list of several is
// refused (NotImplementedError: "several tensors per process").
const at::Tensor& oneTensor(const std::vector<at::Tensor>& tensors, const char* op);
const std::vector<at::Tensor>& oneList(
    const std::vector<std::vector<at::Tensor>>& lists,
    const char* op);
// One tensor per rank of the group: "the <which> list has N tensors for a
// group of SIZE".
void checkPerRank(const std::vector<at::Tensor>& list, int size, const char* op, const char* which);
// Every tensor of list has numel elements: "<which> tensor has N elements,
// <other> M".
void checkNumel(
    const std::vector<at::Tensor>& list,
    int64_t numel,
    const char* op,
    const char* which,
    const char* other);
// The per-rank list of a rooted call (gather's outputs, scatter's inputs):
// on the root one list of size tensors, elsewhere none.
std::vector<at::Tensor> rootList(
    const std::vector<std::vector<at::Tensor>>& lists,
    bool isRoot,
    int root,
    int size,
    const char* op,
    const char* which);

void checkTensor(const at::Tensor& t, const char* op);

// CPU, or CUDA where this build has the CUDA path.
void checkDevice(const at::Device& device, const char* op);

// The one device all tensors of a call are on: CPU, or one CUDA device.
at::Device deviceOf(const std::vector<at::Tensor>& tensors, const char* op);

void checkSameDtype(const std::vector<at::Tensor>& tensors, const char* op);

// The coalesced tensor forms: as many outputs as inputs, each pair of one
// dtype, the larger of each pair (the output when outputsLarger) size times
// the other.  The dtype is the caller's to check: any moves, not any
// reduces.
void checkCoalescedPairs(
    const std::vector<at::Tensor>& outputs,
    const std::vector<at::Tensor>& inputs,
    bool outputsLarger,
    int size,
    const char* op);

size_t countOf(const at::Tensor& t, const Dtype& dt);

// The contiguous tensor a library call reads or writes in place of t: t
// itself, or a copy (copied back by copyBack()).
at::Tensor staged(const at::Tensor& t);

void copyBack(const at::Tensor& user, const at::Tensor& data);

// The contiguous tensor a library call writes in place of t: t itself, or
// a new one (copied into t by copyBack()).
at::Tensor receiveBuffer(const at::Tensor& t);

size_t unitsOf(const at::Tensor& t, const Moved& mv);

// t's elements as a flat tensor of bytes (a copy where t is not contiguous).
at::Tensor bytesOf(const at::Tensor& t);

// Fills t with the bytes of bytesOf() of a tensor of its dtype and shape.
void fillFromBytes(const at::Tensor& t, const at::Tensor& bytes);

// For a PREMUL_SUM: the contiguous input multiplied by the factor, in a new
// tensor (the caller's input is left as it is, as NCCL does).
at::Tensor premultiplied(const at::Tensor& data, const Reduction& red);

// touched and, for a PREMUL_SUM by a CUDA tensor, the factor: the side
// stream reads it (premultiplied()), so the caching allocator must not
// reuse its memory before the side stream is done.
std::vector<at::Tensor> withFactor(std::vector<at::Tensor> touched, const Reduction& red);

// Output buffers every rank's part of which has numel elements, flattened.
at::Tensor flatOf(const std::vector<at::Tensor>& tensors);

void checkRoot(int64_t root, int size, const char* op);

// The rows (first-dimension entries) of t that go to (or come from) each
// rank: the split sizes, or t's rows divided evenly when there are none.
std::vector<int64_t> rowsPerRank(
    const std::vector<int64_t>& splits,
    const at::Tensor& t,
    int size,
    const char* which);

// Elements of one row of t (the product of its sizes after the first).
int64_t rowNumel(const at::Tensor& t);

// Library counts and displacements of smddp_alltoallv, in library elements.
struct Blocks {
  std::vector<size_t> counts, displs;
};

Blocks blocksOf(const std::vector<int64_t>& sizes, size_t unitsPerEntry);

void checkPeer(int peer, int size, const char* op, const char* what);

} // namespace smddp_torch
