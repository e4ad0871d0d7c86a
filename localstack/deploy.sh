#!/usr/bin/env bash
# Builds Stratus and deploys template.yaml to a running LocalStack
# (`make localstack-deploy`; start it with `make localstack-up`). Needs
# docker, samlocal (aws-sam-cli-local) and awslocal (awscli-local).
#
# Environment: STACK_NAME (default stratus), IMAGE_TAG (default local),
# STRATUS_RUNNER_REPOSITORY (default stratus-runner, as the ready hook).
set -euo pipefail
cd "$(dirname "$0")/.."

stack="${STACK_NAME:-stratus}"
tag="${IMAGE_TAG:-local}"
repository="${STRATUS_RUNNER_REPOSITORY:-stratus-runner}"
samconfig="$PWD/localstack/samconfig.toml"

for tool in docker make go samlocal awslocal; do
  command -v "$tool" >/dev/null 2>&1 || { echo "deploy.sh: $tool is not installed (see localstack/README.md)" >&2; exit 1; }
done

# 1. The runner image, built for this machine and pushed to LocalStack's
#    ECR (the ready hook made the repository).
case "$(uname -m)" in
  x86_64 | amd64) architecture=X86_64 ;;
  aarch64 | arm64) architecture=ARM64 ;;
  *) echo "deploy.sh: no Fargate architecture for $(uname -m)" >&2; exit 1 ;;
esac
repository_uri="$(awslocal ecr describe-repositories --repository-names "$repository" \
  --query 'repositories[0].repositoryUri' --output text)"
docker build -t "$repository_uri:$tag" .
docker push "$repository_uri:$tag"

# 2. The network the workers run in: LocalStack's default VPC.
vpc_id="$(awslocal ec2 describe-vpcs --filters Name=isDefault,Values=true \
  --query 'Vpcs[0].VpcId' --output text)"
# shellcheck disable=SC2016 # backquotes are JMESPath literals, not shell
subnet_ids="$(awslocal ec2 describe-subnets --filters "Name=vpc-id,Values=$vpc_id" \
  --query 'join(`,`, Subnets[].SubnetId)' --output text)"

# 3. The functions (as `make sam-build` builds them) and the stack.
make sam-build SAM=samlocal SAM_BUILD_FLAGS="--config-file $samconfig"
samlocal deploy --config-file "$samconfig" --stack-name "$stack" \
  --parameter-overrides \
  "ImageUri=$repository_uri:$tag" \
  "VpcId=$vpc_id" \
  "WorkerSubnetIds=$subnet_ids" \
  "AssignPublicIp=ENABLED" \
  "WorkerCpuArchitecture=$architecture"

awslocal cloudformation describe-stacks --stack-name "$stack" \
  --query 'Stacks[0].Outputs[].[OutputKey,OutputValue]' --output table
