"""See smdistributed: libsmddp's stand-in for SageMaker's module path; only
torch_smddp is provided.  Do not install beside AWS's smdistributed."""
