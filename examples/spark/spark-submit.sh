#!/usr/bin/env bash
# spark-submit with yuniplace's gang annotations as --conf options, as YuniKorn's documentation
# writes them, quoted for the shell. Run it from any directory:
#
#   examples/spark/spark-submit.sh k8s://https://APISERVER:PORT [more spark-submit options]
#
# It runs $SPARK_HOME/bin/spark-submit (else spark-submit from PATH) in cluster mode on Spark's SparkPi
# example; options after the master URL go before the application jar, e.g.
# --conf spark.kubernetes.namespace=spark-jobs. YuniKorn's documentation also passes
# --conf spark.kubernetes.scheduler.name=yunikorn: yuniplace takes such pods wherever no YuniKorn
# scheduler runs (its chart's default, webhook.rewriteSchedulerName: auto). A file of these options pasted with $(cat ...) would not work:
# an unquoted $(...) splits values at their spaces and keeps their quotes; spark-gang.properties
# holds the same settings for spark-submit --properties-file.
#
# You should see five placeholders (tg-<spark-app-id>-*) placed before the driver starts, then the
# driver and, once it runs, each executor taking their place (kubectl get events -w:
# GangReservationComplete, PlaceholderSwapped).
set -euo pipefail
master="${1:?usage: $0 k8s://https://APISERVER:PORT [spark-submit options]}"
shift
exec "${SPARK_HOME:+$SPARK_HOME/bin/}spark-submit" \
  --master "$master" --deploy-mode cluster --name spark-pi \
  --class org.apache.spark.examples.SparkPi \
  --conf spark.kubernetes.container.image=apache/spark:4.0.0 \
  --conf spark.driver.cores=1 --conf spark.driver.memory=2g \
  --conf spark.executor.instances=4 --conf spark.executor.cores=2 --conf spark.executor.memory=4g \
  --conf spark.kubernetes.driver.annotation.yunikorn.apache.org/task-group-name=spark-driver \
  --conf spark.kubernetes.executor.annotation.yunikorn.apache.org/task-group-name=spark-executor \
  --conf 'spark.kubernetes.driver.annotation.yunikorn.apache.org/schedulingPolicyParameters=placeholderTimeoutInSeconds=120 gangSchedulingStyle=Hard' \
  --conf 'spark.kubernetes.driver.annotation.yunikorn.apache.org/task-groups=[
      {"name": "spark-driver", "minMember": 1, "minResource": {"cpu": "1", "memory": "2432Mi"}},
      {"name": "spark-executor", "minMember": 4, "minResource": {"cpu": "2", "memory": "4505Mi"}}]' \
  "$@" \
  local:///opt/spark/examples/jars/spark-examples.jar
