import json, sys
from bench import reconcile
r = reconcile.run(pods=1000, hollow_nodes=100, deployments=10, kills=0, ha_control_plane_nodes=0)
s = r["results"]["startup"]
json.dump({"pods_per_s": s["pods_per_s"], "p99_ms": s["latency"]["from_first_seen"]["p99_ms"],
           "p50_ms": s["latency"]["from_first_seen"]["p50_ms"], "cpu_per_pod": s["cpu_per_pod"],
           "store": {k: s["store"][k] for k in ("commits", "read_index_rounds", "fsyncs")}},
          open(sys.argv[1], "w"), indent=1)
print(s["pods_per_s"], s["latency"]["from_first_seen"]["p99_ms"], s["cpu_per_pod"]["cluster_ms"])
