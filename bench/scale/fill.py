#!/usr/bin/env python3
"""Fill the scale benchmark's API server with N Nodes and P pods (every TENTH a miggate restore pod), bound
to nodes by spec.nodeName so no scheduler works on them. Idempotent-ish: 409s are counted.
usage: fill.py NODES PODS [NAMESPACES]"""
import http.client, json, os, ssl, sys, time, multiprocessing as mp, threading

PKI = os.path.join(os.environ.get("WORKDIR", "/tmp/miggate-scale"), "pki")
NODES, PODS = int(sys.argv[1]), int(sys.argv[2])
NS = int(sys.argv[3]) if len(sys.argv) > 3 else 50

def conn():
    ctx = ssl.create_default_context(cafile=f"{PKI}/ca.crt")
    ctx.load_cert_chain(f"{PKI}/admin.crt", f"{PKI}/admin.key")
    return http.client.HTTPSConnection("127.0.0.1", 16443, context=ctx, timeout=60)

def post(c, path, body):
    data = json.dumps(body)
    for attempt in range(20):
        try:
            c.request("POST", path, data, {"Content-Type": "application/json"})
            r = c.getresponse(); r.read()
            if r.status == 429 or r.status >= 500:
                time.sleep(0.2 * (attempt + 1)); continue
            return r.status
        except (OSError, http.client.HTTPException):
            time.sleep(0.5)
            c.close()
            c = conn()
    return -1

def node(i):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i:05d}", "labels": {
        "kubernetes.io/hostname": f"n{i:05d}", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8"}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}], "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"}}}

def pod(i):
    ns = f"bench-{i % NS:03d}"
    meta = {"name": f"p{i:06d}", "namespace": ns, "labels": {"app": f"app-{i % 997}", "pod-template-hash": "5d8f9c7b6"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "x" * 200}}
    if i % 10 == 0:
        meta["annotations"]["miggate.io/restore-from"] = f"ckpt-{i % 100}"
    return ns, {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {
        "nodeName": f"n{i % max(NODES,1):05d}", "containers": [{"name": "main", "image": "registry.example/vllm:0.9.1",
        "args": ["--model", "/models/llama", "--port", "8000"], "env": [{"name": "A", "value": "b"}],
        "resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "4", "memory": "16Gi"}}}]}}

def worker(kind, lo, hi, q):
    stats = {}
    lock = threading.Lock()
    def run(rng):
        c = conn()
        for i in rng:
            if kind == "node":
                s = post(c, "/api/v1/nodes", node(i))
            else:
                ns, body = pod(i)
                s = post(c, f"/api/v1/namespaces/{ns}/pods", body)
            with lock: stats[s] = stats.get(s, 0) + 1
    ts = [threading.Thread(target=run, args=(range(lo + k, hi, 8),)) for k in range(8)]
    [t.start() for t in ts]; [t.join() for t in ts]
    q.put(stats)

def fan(kind, n, procs=6):
    q = mp.Queue(); step = (n + procs - 1) // procs
    ps = [mp.Process(target=worker, args=(kind, k * step, min(n, (k + 1) * step), q)) for k in range(procs)]
    t = time.time(); [p.start() for p in ps]
    total = {}
    for _ in ps:
        for s, c in q.get().items(): total[s] = total.get(s, 0) + c
    [p.join() for p in ps]
    print(f"{kind}: {n} in {time.time()-t:.1f}s statuses {total}", flush=True)

if __name__ == "__main__":
    c = conn()
    for k in range(NS):
        post(c, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"bench-{k:03d}"}})
        post(c, f"/api/v1/namespaces/bench-{k:03d}/serviceaccounts", {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}})
    fan("node", NODES)
    fan("pod", PODS)
