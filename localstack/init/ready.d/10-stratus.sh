#!/usr/bin/env bash
# LocalStack ready hook (runs inside the container, once LocalStack serves
# requests): creates what deploying template.yaml needs before the stack
# exists. Idempotent, so a restart with PERSISTENCE=1 is harmless.
#
#   - the bucket samlocal uploads code and state machine definitions to
#     (samconfig.toml: s3_bucket);
#   - the ECR repository the runner image is pushed to (ImageUri);
#   - a default VPC with subnets (VpcId, WorkerSubnetIds).
#
# Everything else (table, data bucket, queues, secret, state machines,
# functions, HTTP API, cluster, task definition) is the stack's own.
set -euo pipefail

region="${AWS_DEFAULT_REGION:-us-east-1}"
artifacts_bucket="${STRATUS_SAM_BUCKET:-stratus-sam-artifacts}"
runner_repository="${STRATUS_RUNNER_REPOSITORY:-stratus-runner}"

if ! awslocal s3api head-bucket --bucket "$artifacts_bucket" >/dev/null 2>&1; then
  if [ "$region" = "us-east-1" ]; then
    awslocal s3api create-bucket --bucket "$artifacts_bucket" >/dev/null
  else
    awslocal s3api create-bucket --bucket "$artifacts_bucket" \
      --create-bucket-configuration "LocationConstraint=$region" >/dev/null
  fi
fi

if ! awslocal ecr describe-repositories --repository-names "$runner_repository" >/dev/null 2>&1; then
  awslocal ecr create-repository --repository-name "$runner_repository" >/dev/null
fi

vpc_id="$(awslocal ec2 describe-vpcs --filters Name=isDefault,Values=true \
  --query 'Vpcs[0].VpcId' --output text)"
if [ -z "$vpc_id" ] || [ "$vpc_id" = "None" ]; then
  vpc_id="$(awslocal ec2 create-default-vpc --query 'Vpc.VpcId' --output text)"
fi

echo "stratus: LocalStack ready: s3://$artifacts_bucket, ECR $runner_repository, VPC $vpc_id ($region)"
