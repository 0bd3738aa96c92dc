"""test_hf.py - Hugging Face's Trainer and Accelerate on their SageMaker
data-parallel paths, on backend smddp, against the same job on gloo.

    test_hf.py trainer|accelerate smddp|gloo OUT

One process per rank (smddp-run).  "smddp" takes the SageMaker path as
SageMaker would start it: the Trainer through SM_FRAMEWORK_PARAMS
(sagemaker_distributed_dataparallel_enabled), Accelerate through
ACCELERATE_USE_SAGEMAKER and ACCELERATE_SAGEMAKER_DISTRIBUTED_TYPE; both
then import smdistributed.dataparallel.torch.torch_smddp and initialize
backend "smddp", and the Trainer places the model on GPU
SMDATAPARALLEL_LOCAL_RANK.  "gloo" is the same job on their CPU path
(use_cpu / cpu=True: backend gloo).  Each rank saves the trained
parameters to OUT.RANK.pt, which tests/torch/hf.sh compares.

On a machine without CUDA (DEVICE unset or "cpu") two things stand in for
the GPU placement, and only those: ACCELERATE_TORCH_DEVICE=cpu gives
Accelerate's state the CPU as its device (it would take cuda:LOCAL_RANK),
and DistributedDataParallel, when handed device_ids for a module on the
CPU (which torch refuses), records them, checks them against the local
rank, and wraps without them.

With DEVICE=cuda nothing stands in: both paths place the model on GPU
LOCAL_RANK and DDP gets device_ids=[SMDATAPARALLEL_LOCAL_RANK], as on
SageMaker.  Where there are fewer GPUs than local ranks (2 ranks sharing
the one GPU of a test machine) both variables are taken modulo the GPUs
before either client reads them.  The "gloo" job then trains on the same
GPU too (ddp_backend="gloo", InitProcessGroupKwargs(backend="gloo"): DDP
over gloo reduces CUDA tensors through host memory), with deterministic
algorithms in both jobs (the embedding's backward adds with atomics
otherwise) and cuBLAS's fixed workspace, so that the parameters are still
compared bit for bit.

The model is built from a config (no model hub): a 1-layer BERT
classifier, dropout off, on synthetic token ids.
"""
import json
import os
import sys

MODE, BACKEND, OUT = sys.argv[1], sys.argv[2], sys.argv[3]
DEVICE = os.environ.get("DEVICE", "cpu")
if BACKEND == "smddp":
    if MODE == "trainer":
        os.environ["SM_FRAMEWORK_PARAMS"] = json.dumps(
            {"sagemaker_distributed_dataparallel_enabled": True,
             "sagemaker_instance_type": "ml.p4d.24xlarge"})
    else:
        os.environ["ACCELERATE_USE_SAGEMAKER"] = "true"
        os.environ["ACCELERATE_SAGEMAKER_DISTRIBUTED_TYPE"] = "DATA_PARALLEL"
    if DEVICE == "cpu":
        os.environ["ACCELERATE_TORCH_DEVICE"] = "cpu"

if DEVICE == "cuda":  # deterministic matrix products: set before CUDA starts
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from common import check, finish  # noqa: E402

placed = []  # the device_ids DDP was given


class RecordingDDP(torch.nn.parallel.DistributedDataParallel):
    """DDP that records the device_ids it is given (the CUDA placement of
    the SageMaker paths) and, for a CPU module (DEVICE=cpu), wraps without
    them."""

    def __init__(self, module, device_ids=None, output_device=None, *args, **kwargs):
        placed.append(device_ids)
        if device_ids is not None and all(p.device.type == "cpu" for p in module.parameters()):
            device_ids = output_device = None
        super().__init__(module, device_ids, output_device, *args, **kwargs)


torch.nn.parallel.DistributedDataParallel = RecordingDDP
torch.set_num_threads(1)
if DEVICE == "cuda":
    gpus = torch.cuda.device_count()
    for var in ("LOCAL_RANK", "SMDATAPARALLEL_LOCAL_RANK"):
        if var in os.environ:
            os.environ[var] = str(int(os.environ[var]) % gpus)
    # warn_only: torch refuses the classifier's NLLLoss on CUDA in this mode
    # (flagged, though it reduces a batch of 4 in one thread block); the
    # embedding's backward, whose atomics differ run to run, takes its
    # deterministic variant
    torch.use_deterministic_algorithms(True, warn_only=True)

from transformers import BertConfig, BertForSequenceClassification  # noqa: E402

STEPS, BATCH, SEQ = 6, 4, 8


def model():
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=32, num_labels=2,
                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return BertForSequenceClassification(cfg)


class Data(torch.utils.data.Dataset):
    def __init__(self, n=64):
        g = torch.Generator().manual_seed(7)
        self.ids = torch.randint(0, 64, (n, SEQ), generator=g)
        self.labels = torch.randint(0, 2, (n,), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


def trainer():
    from transformers import Trainer, TrainingArguments

    args = TrainingArguments(
        output_dir=os.path.join(os.getcwd(), f"trainer-{BACKEND}"),
        per_device_train_batch_size=BATCH, max_steps=STEPS, learning_rate=1e-2, seed=0,
        report_to=[], save_strategy="no", logging_strategy="no", disable_tqdm=True,
        dataloader_num_workers=0, use_cpu=BACKEND == "gloo" and DEVICE == "cpu",
        ddp_backend="gloo" if BACKEND == "gloo" else None,
    )
    t = Trainer(model=model(), args=args, train_dataset=Data())
    t.train()
    return t.model


def accelerate():
    from accelerate import Accelerator

    from accelerate.utils import InitProcessGroupKwargs

    if BACKEND == "gloo" and DEVICE == "cuda":  # the same GPU, reduced over gloo
        acc = Accelerator(kwargs_handlers=[InitProcessGroupKwargs(backend="gloo")])
    else:
        acc = Accelerator(cpu=BACKEND == "gloo")
    m = model()
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    loader = torch.utils.data.DataLoader(Data(), batch_size=BATCH, shuffle=False)
    m, opt, loader = acc.prepare(m, opt, loader)
    for step, batch in enumerate(loader):
        if step == STEPS:
            break
        loss = m(**batch).loss
        acc.backward(loss)
        opt.step()
        opt.zero_grad()
    return acc.unwrap_model(m)


if os.environ["RANK"] == "0":  # what training must have moved away from
    torch.save(model().state_dict(), f"{OUT}.init.pt")
trained = trainer() if MODE == "trainer" else accelerate()
check(dist.is_initialized(), "no process group")
check(dist.get_backend() == BACKEND, f"{MODE} ran on backend {dist.get_backend()}, not {BACKEND}")
lr = int(os.environ["LOCAL_RANK"])
if BACKEND == "smddp":
    check(os.environ.get("SMDATAPARALLEL_LOCAL_RANK") == str(lr),
          f"SMDATAPARALLEL_LOCAL_RANK={os.environ.get('SMDATAPARALLEL_LOCAL_RANK')}")
if BACKEND == "smddp" or DEVICE == "cuda":
    check(placed == [[lr]], f"the model was placed on devices {placed}, not [[{lr}]]")
if DEVICE == "cuda":
    where = {p.device for p in trained.parameters()}
    check(where == {torch.device("cuda", lr)}, f"the model trained on {where}, not cuda:{lr}")
torch.save({k: v.detach().cpu() for k, v in trained.state_dict().items()},
           f"{OUT}.{dist.get_rank()}.pt")
finish(f"{MODE} on {BACKEND}, {DEVICE}")
