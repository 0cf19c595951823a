import json, sys
from bench import reconcile
nodes = int(sys.argv[2])
r = reconcile.run(pods=3000, hollow_nodes=nodes, deployments=10, kills=0, ha_control_plane_nodes=0)
s = r["results"]["startup"]
json.dump({"nodes": nodes, "pods_per_s": s["pods_per_s"], "p99_ms": s["latency"]["from_first_seen"]["p99_ms"],
           "cpu_per_pod": s["cpu_per_pod"]}, open(sys.argv[1], "w"), indent=1)
print(nodes, round(s["pods_per_s"]), s["cpu_per_pod"]["cluster_ms"], s["cpu_per_pod"]["by_role_ms"]["scheduler"])
