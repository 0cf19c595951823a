"""kubemu.kubectl.describe_batch: kubectl describe job / cronjob."""
from __future__ import annotations

from kubemu.kubectl.describe import Related, describe
from kubemu.kubectl.describe_batch import capped_indexes

from .test_printers import NOW, ago


def job(**spec) -> dict:
    return {"kind": "Job",
            "metadata": {"name": "pi", "namespace": "default", "labels": {"job-name": "pi"},
                         "ownerReferences": [{"kind": "CronJob", "name": "hello", "controller": True}]},
            "spec": {"selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u"}},
                     "template": {"spec": {"containers": [{"name": "pi", "image": "perl"}],
                                           "restartPolicy": "Never"}}, **spec}}


def test_job_describe_reads_like_kubectl():
    j = job(parallelism=2, completions=5, completionMode="Indexed", suspend=False, backoffLimit=6)
    j["status"] = {"startTime": ago(100), "completionTime": ago(40), "succeeded": 5, "ready": 0,
                   "completedIndexes": "0-4"}
    assert describe(j, Related(events=[]), NOW).startswith("""Name:               pi
Namespace:          default
Selector:           batch.kubernetes.io/controller-uid=u
Labels:             job-name=pi
Annotations:        <none>
Controlled By:      CronJob/hello
Parallelism:        2
Completions:        5
Completion Mode:    Indexed
Suspend:            false
Backoff Limit:      6
Start Time:         Mon, 01 Jan 2024 11:58:20 +0000
Completed At:       Mon, 01 Jan 2024 11:59:20 +0000
Duration:           60s
Pods Statuses:      0 Active (0 Ready) / 5 Succeeded / 0 Failed
Completed Indexes:  0-4
Pod Template:
  Labels:  <none>
  Containers:
   pi:
""")


def test_a_running_work_queue_job():
    j = job(parallelism=3, activeDeadlineSeconds=60, ttlSecondsAfterFinished=0)
    j["status"] = {"active": 2, "failed": 1}
    text = describe(j, Related(events=None), NOW)
    assert "Completions:                 <unset>\n" in text
    assert "TTL Seconds After Finished:  0\n" in text
    assert "Active Deadline Seconds:     60s\n" in text
    assert "Pods Statuses:               2 Active / 0 Succeeded / 1 Failed\n" in text
    assert "Start Time" not in text and "Completed Indexes" not in text


def test_completed_indexes_are_capped():
    assert capped_indexes("") == "<none>"
    assert capped_indexes("0-4") == "0-4"
    long = ",".join(str(i) for i in range(0, 60, 2))
    assert capped_indexes(long, 10) == "0,2,4,6,8,10,...", capped_indexes(long, 10)


def test_cronjob_describe_reads_like_kubectl():
    cj = {"kind": "CronJob", "metadata": {"name": "hello", "namespace": "default"},
          "spec": {"schedule": "*/5 * * * *", "concurrencyPolicy": "Allow", "suspend": False,
                   "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1,
                   "jobTemplate": {"spec": {"template": {"spec": {
                       "containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "OnFailure"}}}}},
          "status": {"active": [{"name": "hello-1"}, {"name": "hello-2"}], "lastScheduleTime": ago(30)}}
    text = describe(cj, Related(events=[]), NOW)
    assert text.startswith("""Name:                          hello
Namespace:                     default
Labels:                        <none>
Annotations:                   <none>
Schedule:                      */5 * * * *
Concurrency Policy:            Allow
Suspend:                       False
Successful Job History Limit:  3
Failed Job History Limit:      1
Starting Deadline Seconds:     <unset>
Selector:                      <unset>
Parallelism:                   <unset>
Completions:                   <unset>
Pod Template:
"""), text
    assert text.endswith("""Last Schedule Time:  Mon, 01 Jan 2024 11:59:30 +0000
Active Jobs:         hello-1, hello-2
Events:              <none>
"""), text
    cj["status"] = {}
    text = describe(cj, Related(events=[]), NOW)
    assert "Last Schedule Time:  <unset>\nActive Jobs:         <none>\n" in text
