"""See smdistributed: libsmddp's stand-in for SageMaker's module path, with
torch_smddp and the 1.x API (distributed, parallel).  Do not install beside
AWS's smdistributed."""
