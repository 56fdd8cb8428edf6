-- wrk script of bench/webhook/run.sh: every request POSTs one AdmissionReview as JSON.
-- The body is the file named by MIGGATE_BENCH_BODY (default: the allowed restore pod's review,
-- relative to the repository root).
local path = os.getenv("MIGGATE_BENCH_BODY") or "testdata/admission/pod-create-restore-allowed.json"
local file = assert(io.open(path, "rb"))
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = file:read("*a")
file:close()
