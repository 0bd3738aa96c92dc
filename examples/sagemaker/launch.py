"""examples/sagemaker/launch.py - examples/torch/ddp.py on 2 SageMaker instances of 8 GPUs,
in the image of examples/container (pushed to ECR), whose entrypoint is smddp-run:

    python launch.py --image ACCOUNT.dkr.ecr.REGION.amazonaws.com/smddp-ddp:latest --role ARN

SageMaker starts the container with "train" on every instance; smddp-run
reads SageMaker's configuration (/opt/ml/input/config) and the
torch_distributed distribution below, and starts one rank per GPU on every
instance (no ssh between the containers); each rank runs examples/container/train.
`python launch.py --hyperparameters` prints what the estimator passes, for
smddp-run --dry-run (tests/examples/torch.sh) without AWS.
"""
import argparse
import json

# torch_distributed in the hyperparameter form SageMaker hands a container
HYPERPARAMETERS = {"sagemaker_torch_distributed_enabled": "true"}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--image", help="the image of examples/container, in ECR")
    p.add_argument("--role", help="the SageMaker execution role's ARN")
    p.add_argument("--instance-type", default="ml.p4d.24xlarge")
    p.add_argument("--instance-count", type=int, default=2)
    p.add_argument("--hyperparameters", action="store_true", help="print them as JSON and exit")
    args = p.parse_args()
    if args.hyperparameters:
        print(json.dumps(HYPERPARAMETERS))
        return
    if not args.image or not args.role:
        p.error("--image and --role are needed to launch")
    from sagemaker.estimator import Estimator  # pip install sagemaker

    est = Estimator(
        image_uri=args.image,
        role=args.role,
        instance_count=args.instance_count,
        instance_type=args.instance_type,
        hyperparameters=HYPERPARAMETERS,
        base_job_name="smddp-ddp",
        max_run=3600,
    )
    est.fit()


if __name__ == "__main__":
    main()
