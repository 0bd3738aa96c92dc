"""SageMaker's module path of the "smddp" backend, for programs written for
AWS's smdistributed.dataparallel: ``import
smdistributed.dataparallel.torch.torch_smddp`` registers libsmddp's backend,
and SMDDP's 1.x API (``smdistributed.dataparallel.torch.distributed``,
``smdistributed.dataparallel.torch.parallel``) runs on it.

Do not install this package beside AWS's own smdistributed package
(smdistributed-dataparallel or smdistributed-modelparallel): both own the
module names under smdistributed, and whichever was installed last replaces
the other's files.
"""
