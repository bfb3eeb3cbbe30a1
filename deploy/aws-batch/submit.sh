#!/bin/sh
# Runs a sharded export on AWS Batch: the plan job, then the shards as one array job (each child's
# AWS_BATCH_JOB_ARRAY_INDEX is its shard), then the commit job, which Batch starts only once every
# child has succeeded (dependsOn the array job). Register the definitions first:
#   for d in $(jq -c '.[]' job-definitions.json); do aws batch register-job-definition --cli-input-json "$d"; done
# The HERE credentials.properties lies on the EFS volume the definitions mount; the job role may
# read and write the bucket. Needs the AWS CLI and jq.
#   deploy/aws-batch/submit.sh QUEUE [SHARDS]
set -eu
queue=$1
shards=${2:-4}

plan_job=$(aws batch submit-job --job-name catalog-export-plan --job-queue "$queue" --job-definition catalog-export-plan \
  --parameters shards="$shards" --query jobId --output text)
while :; do
  status=$(aws batch describe-jobs --jobs "$plan_job" --query 'jobs[0].status' --output text)
  case "$status" in SUCCEEDED) break ;; FAILED) echo "plan job $plan_job failed"; exit 1 ;; esac
  sleep 10
done
stream=$(aws batch describe-jobs --jobs "$plan_job" --query 'jobs[0].container.logStreamName' --output text)
line=$(aws logs get-log-events --log-group-name /aws/batch/job --log-stream-name "$stream" --query 'events[].message' --output json | jq -r '.[] | select(contains("\"plan\""))' | tail -n 1)
plan=$(printf '%s' "$line" | jq -r '.plan // empty')
[ -n "$plan" ] || { echo "nothing to export: $line"; exit 0; }
count=$(printf '%s' "$line" | jq -r '.shards')
echo "plan: $plan ($count shards)"

shards_job=$(aws batch submit-job --job-name catalog-export-shards --job-queue "$queue" --job-definition catalog-export-shard \
  --array-properties size="$count" --parameters plan="$plan" --query jobId --output text)
commit_job=$(aws batch submit-job --job-name catalog-export-commit --job-queue "$queue" --job-definition catalog-export-commit \
  --depends-on jobId="$shards_job" --parameters plan="$plan" --query jobId --output text)
echo "shards: $shards_job, commit: $commit_job (starts when every shard has succeeded)"
