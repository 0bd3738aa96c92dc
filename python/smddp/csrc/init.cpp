// init.cpp - the smddp._C Python module: the backend class for
// torch.distributed.Backend.register_backend (done in smddp/torch.py).
#include <chrono>

#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include <smddp/smddp.h>

#include "ProcessGroupSMDDP.hpp"
#include "WorkQueue.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "libsmddp c10d backend (internal; use smddp.torch)";

  // The base class must be known to pybind11 before a subclass is bound.
  py::module_::import("torch.distributed");

  py::class_<
      smddp_torch::ProcessGroupSMDDP,
      c10d::Backend,
      c10::intrusive_ptr<smddp_torch::ProcessGroupSMDDP>>(m, "ProcessGroupSMDDP")
      .def(
          py::init([](const c10::intrusive_ptr<c10d::Store>& store,
                      int rank,
                      int size,
                      std::chrono::milliseconds timeout) {
            return c10::make_intrusive<smddp_torch::ProcessGroupSMDDP>(
                store, rank, size, timeout);
          }),
          py::arg("store"),
          py::arg("rank"),
          py::arg("size"),
          py::arg("timeout"),
          // The rendezvous blocks on the store and on the peers.
          py::call_guard<py::gil_scoped_release>())
      // torch (2.15) has the non-members of a new group split their parent
      // when it supports splitting and a device is bound to it, as NCCL
      // needs; this backend's new groups rendezvous through the store among
      // their members only, so there is nothing to do.
      .def(
          "perform_nocolor_split",
          [](const c10::intrusive_ptr<smddp_torch::ProcessGroupSMDDP>&, const py::object&) {},
          py::arg("device"))
      .def(
          "_cuda_path_stats",
          [](const c10::intrusive_ptr<smddp_torch::ProcessGroupSMDDP>& pg) {
            auto st = pg->cudaPathStats();
            py::dict d;
            d["mode"] = st.mode == SMDDP_CUDA_QUEUED ? "queued"
                : st.mode == SMDDP_CUDA_BLOCKING     ? "blocking"
                                                     : "undecided";
            d["inline"] = st.inlined;
            d["worker"] = st.queued;
            return d;
          },
          "How the CUDA works of this group ran: the communicator's mode, how many on "
          "the caller's thread and how many on the worker (tests, benchmarks).");

  m.def("_stop_all_at_exit", &smddp_torch::WorkQueue::stopAllAtExit,
        "Stops the threads of every group still running (smddp.torch's atexit hook).",
        py::call_guard<py::gil_scoped_release>());
  m.def(
      "_set_cuda_inline",
      [](bool on) { smddp_torch::WorkQueue::inlineAllowed.store(on); },
      "False: every CUDA collective goes through the group's worker thread, as in the "
      "blocking mode (benchmarks compare the two paths).");
  m.def("_sync_returns_no_work", [] { return smddp_torch::kSyncReturnsNoWork; },
        "Whether a CUDA collective torch waits for at once (async_op=False) may run on the "
        "caller's current stream and return None, as ProcessGroupNCCL's does (torch 2.8 and "
        "later; tests).");
  m.def("library_version", [] { return std::string(smddp_version()); },
        "The version of the libsmddp the extension runs with.");
  m.def("header_version", [] {
    return std::to_string(SMDDP_VERSION_MAJOR) + "." + std::to_string(SMDDP_VERSION_MINOR) + "." +
        std::to_string(SMDDP_VERSION_PATCH);
  }, "The version of the libsmddp headers the extension was built with.");
  m.def("cuda_built", [] {
#ifdef SMDDP_TORCH_CUDA
    return true;
#else
    return false;
#endif
  }, "Whether the extension was built with its CUDA path.");
}
