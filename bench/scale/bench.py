#!/usr/bin/env python3
"""The webhook's start and an API server restart at scale, beside the API server's own floor.

usage: bench.py NODES PODS [--fill] [--apiserver-flags "..."] [--runs K] [--miggate PATH]

--fill wipes etcd, starts the API server and fills it (fill.py); without it, the data in
$WORKDIR/etcd is reused (the API server restarted with the given flags). Paths: see
control-plane.sh; MIGGATE_SRC is the repository (default: two levels above this file).
Then, K times: start the webhook (as its ServiceAccount), time to /readyz 200; the API server's
floor (one unpaged list of every pod from its watch cache, resourceVersion=0, read whole);
restart the API server; time from its /readyz to every webhook cache current again; the floor
again; whether the webhook's /readyz was ever 503 across; peak RSS; decisions after.
"""
import argparse, json, os, shlex, ssl, subprocess, sys, threading, time, urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("MIGGATE_SRC", os.path.dirname(os.path.dirname(HERE)))
W = os.environ.get("WORKDIR", "/tmp/miggate-scale")
PKI = f"{W}/pki"
CTL = f"{HERE}/control-plane.sh"
K = [os.environ.get("KUBECTL", "kubectl"), "--kubeconfig", f"{W}/admin.kubeconfig"]
HEALTH = "http://127.0.0.1:18080"
ADMIT = "https://127.0.0.1:18443"

ap = argparse.ArgumentParser()
ap.add_argument("nodes", type=int)
ap.add_argument("pods", type=int)
ap.add_argument("--fill", action="store_true")
ap.add_argument("--apiserver-flags", default="")
ap.add_argument("--runs", type=int, default=3)
ap.add_argument("--miggate", default=os.path.join(SRC, "target/release/miggate"))
ap.add_argument("--label", default="")
a = ap.parse_args()


def sh(cmd, **kw):
    return subprocess.run(cmd, shell=isinstance(cmd, str), check=True, capture_output=True, text=True, **kw).stdout


def apiserver():
    sh([CTL, "apiserver"] + shlex.split(a.apiserver_flags))


def floor():
    ctx = ssl.create_default_context(cafile=f"{PKI}/ca.crt")
    ctx.load_cert_chain(f"{PKI}/admin.crt", f"{PKI}/admin.key")
    t = time.monotonic()
    with urllib.request.urlopen("https://127.0.0.1:16443/api/v1/pods?resourceVersion=0", context=ctx, timeout=300) as r:
        n = len(r.read())
    return time.monotonic() - t, n


def readyz():
    try:
        with urllib.request.urlopen(HEALTH + "/readyz", timeout=5) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)
    except Exception:
        return None, None


def review(body):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    req = urllib.request.Request(ADMIT + "/validate", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
        return json.load(r)["response"]


def binding(pod, ns, node):
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "bench-%d" % time.time_ns(), "kind": {"group": "", "version": "v1", "kind": "Binding"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "subResource": "binding",
        "requestKind": {"group": "", "version": "v1", "kind": "Binding"},
        "requestResource": {"group": "", "version": "v1", "resource": "pods"}, "requestSubResource": "binding",
        "name": pod, "namespace": ns, "operation": "CREATE",
        "userInfo": {"username": "system:kube-scheduler", "groups": ["system:authenticated"]},
        "object": {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod, "namespace": ns},
                   "target": {"apiVersion": "v1", "kind": "Node", "name": node}},
        "oldObject": None, "dryRun": False}}


def decisions():
    out = {}
    for pod, ns, node in [("p000000", "bench-000", "n00000"), ("p000010", "bench-010", "n00010"), ("p000011", "bench-011", "n00011")]:
        r = review(binding(pod, ns, node))
        out[pod] = (r["allowed"], (r.get("status") or {}).get("message", "")[:160], (r.get("warnings") or [""])[0][:100])
    return out


def setup():
    sh([CTL, "pki"])
    sh([CTL, "etcd", "wipe"])
    apiserver()
    deploy = sh([a.miggate, "deploy"])
    docs = [d for d in deploy.split("\n---\n")]
    keep = []
    for d in docs:
        kind = next((l.split(":", 1)[1].strip() for l in d.splitlines() if l.startswith("kind:")), "")
        if kind in ("Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Secret"):
            keep.append(d)
    subprocess.run(K + ["apply", "--server-side", "-f", "-"], input="\n---\n".join(keep), text=True, check=True, capture_output=True)
    t = time.monotonic()
    print(sh(["python3", f"{HERE}/fill.py", str(a.nodes), str(a.pods)]).strip(), f"({time.monotonic()-t:.0f}s)", flush=True)
    ck = open(f"{SRC}/testdata/kubectl/gpucheckpoint-vllm-ckpt.yaml").read().replace("name: vllm-ckpt", "name: ckpt-0").replace("namespace: ml", "namespace: bench-000")
    subprocess.run(K + ["apply", "-f", "-"], input=ck, text=True, check=True, capture_output=True)
    gn = open(f"{SRC}/testdata/webhook-store/nodes/gpu-node-9.yaml").read().replace("gpu-node-9", "n00000")
    subprocess.run(K + ["apply", "-f", "-"], input=gn, text=True, check=True, capture_output=True)


def webhook_kubeconfig():
    token = sh(K + ["create", "token", "miggate-webhook", "-n", "miggate-system", "--duration", "24h"]).strip()
    path = f"{W}/webhook.kubeconfig"
    cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "w",
           "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:16443", "certificate-authority": f"{PKI}/ca.crt"}}],
           "users": [{"name": "u", "user": {"token": token}}],
           "contexts": [{"name": "w", "context": {"cluster": "c", "user": "u"}}]}
    open(path, "w").write(json.dumps(cfg))
    return path


def tls_pair():
    if not os.path.exists(f"{W}/tls.crt"):
        sh(f"openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout {W}/tls.key -out {W}/tls.crt -days 30 -subj /CN=miggate-webhook.miggate-system.svc -addext subjectAltName=DNS:miggate-webhook.miggate-system.svc 2>/dev/null")


def run_once(i, kubeconfig):
    env = dict(os.environ, MIGGATE_LOG_FORMAT="json")
    log = open(f"{W}/webhook-{a.label}-{i}.log", "w")
    t0 = time.monotonic()
    p = subprocess.Popen([a.miggate, "webhook", "--listen", "127.0.0.1:18443", "--health-listen", "127.0.0.1:18080",
                          "--tls-cert", f"{W}/tls.crt", "--tls-key", f"{W}/tls.key", "--store", "kube",
                          "--kubeconfig", kubeconfig, "--binder", "system:kube-scheduler"], stdout=log, stderr=log, env=env)
    try:
        while readyz()[0] != 200:
            if p.poll() is not None:
                raise SystemExit(f"webhook exited: see {log.name}")
            time.sleep(0.05)
        ready = time.monotonic() - t0
        f1, size = floor()
        before = decisions()
        # Poll /readyz through the API server's restart.
        unready = []
        stop = threading.Event()

        def poll():
            while not stop.is_set():
                s, _ = readyz()
                if s != 200:
                    unready.append((round(time.monotonic() - t0, 2), s))
                time.sleep(0.1)
        th = threading.Thread(target=poll); th.start()
        errors0 = {c["kind"]: c["errors"] for c in readyz()[1]["store"]["kube"]}
        k0 = time.monotonic()
        apiserver()
        back = time.monotonic()
        while True:
            _, body = readyz()
            caches = body["store"]["kube"] if body else []
            # Every cache saw the restart (an error) and is current again.
            if caches and all(c["staleSeconds"] == 0 and c["errors"] > errors0[c["kind"]] for c in caches):
                break
            time.sleep(0.05)
        current = time.monotonic() - back
        modes = sorted({c.get("list") for c in caches if c.get("list")})
        stop.set(); th.join()
        f2, _ = floor()
        after = decisions()
        hwm = next(l.split()[1] for l in open(f"/proc/{p.pid}/status") if l.startswith("VmHWM"))
        print(json.dumps({"run": i, "ready_s": round(ready, 2), "floor_s": round(f1, 2), "list_MiB": round(size / 2**20),
                          "apiserver_down_up_s": round(back - k0, 2), "current_after_restart_s": round(current, 2),
                          "floor_after_s": round(f2, 2), "unready_polls": unready[:5], "n_unready": len(unready),
                          "peak_rss_MiB": round(int(hwm) / 1024), "list_modes": modes,
                          "decisions_same": before == after, "decisions": after}), flush=True)
    finally:
        p.terminate(); p.wait()


if a.fill:
    setup()
else:
    sh([CTL, "etcd"])
    apiserver()
tls_pair()
kc = webhook_kubeconfig()
print(f"# {a.label}: nodes={a.nodes} pods={a.pods} apiserver flags={a.apiserver_flags!r} miggate={a.miggate}", flush=True)
for i in range(a.runs):
    run_once(i, kc)
