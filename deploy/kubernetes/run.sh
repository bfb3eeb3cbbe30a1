#!/bin/sh
# Runs a sharded export on Kubernetes: plan -> shards (an Indexed Job) -> commit, each a Job, each
# started when the one before has completed. Needs kubectl only. Edit config.yaml first.
#   deploy/kubernetes/run.sh [namespace]
set -eu
here=$(dirname "$0")
ns=${1:-default}
k() { kubectl --namespace "$ns" "$@"; }
# Waits until a Job has completed (0) or failed (1).
wait_job() {
  while :; do
    state=$(k get job "$1" -o jsonpath='{.status.conditions[?(@.status=="True")].type}')
    case "$state" in
      *Complete*) return 0 ;;
      *Failed*) echo "job $1 failed:"; k logs "job/$1" --tail=5 || true; return 1 ;;
    esac
    sleep 10
  done
}

k apply -f "$here/config.yaml"
for job in catalog-export-plan catalog-export-shards catalog-export-commit; do k delete job "$job" --ignore-not-found; done

k create -f "$here/plan.yaml"
wait_job catalog-export-plan
line=$(k logs job/catalog-export-plan | grep '"plan"' | tail -n 1)
plan=$(printf '%s' "$line" | sed -n 's/.*"plan":"\([^"]*\)".*/\1/p')
if [ -z "$plan" ]; then
  echo "nothing to export: $line"
  exit 0
fi
echo "plan: $plan"

kubectl set env --local -f "$here/shards.yaml" PLAN="$plan" -o yaml | k create -f -
# Failed once a shard has used up its retries (maxFailedIndexes: 0): then nothing is committed.
wait_job catalog-export-shards

kubectl set env --local -f "$here/commit.yaml" PLAN="$plan" -o yaml | k create -f -
wait_job catalog-export-commit
k logs job/catalog-export-commit
