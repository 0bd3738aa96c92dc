"""See smdistributed: libsmddp's stand-in for SageMaker's module path, with
torch.torch_smddp and the 1.x API (torch.distributed, torch.parallel).  Do
not install beside AWS's smdistributed."""
