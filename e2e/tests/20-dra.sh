# shellcheck shell=bash
# A DRA restore pod: the real scheduler allocates its claim from a driver's ResourceSlice, and
# the device-map webhook writes cuda-checkpoint's device map into its Binding.

test_a_dra_restore_pod_gets_its_device_map_at_binding() {
    fixture dra-driver.yaml NODE="$E2E_NODE" | kubectl apply --server-side -f - >/dev/null
    "$E2E_REPO/target/release/miggate" claim -n "$TENANT_NS" fits --name dra-fits |
        kubectl -n "$TENANT_NS" apply --server-side -f - >/dev/null
    fixture dra-restore-pod.yaml NAME=dra-fits CHECKPOINT=fits TEMPLATE=dra-fits | create
    until_ok 90 "pod dra-fits bound to $E2E_NODE" bash -c \
        "[ \"\$(kubectl -n $TENANT_NS get pod dra-fits -o jsonpath='{.spec.nodeName}')\" = $E2E_NODE ]"
    local claim device uuid map expected
    claim=$(kubectl -n "$TENANT_NS" get pod dra-fits -o jsonpath='{.status.resourceClaimStatuses[0].resourceClaimName}')
    device=$(kubectl -n "$TENANT_NS" get resourceclaim "$claim" -o jsonpath='{.status.allocation.devices.results[0].device}')
    uuid=$(kubectl get resourceslice "$E2E_NODE-gpu.nvidia.com" \
        -o jsonpath="{.spec.devices[?(@.name==\"$device\")].attributes.uuid.string}")
    [ -n "$uuid" ] || fail "claim $claim allocated no device of the slice (device '$device')"
    # The checkpoint held MIG-b4b2228d…: no pair when it got that slice back, else one pair.
    if [ "$uuid" = MIG-b4b2228d-6933-5839-bc0e-41ab9edb61c6 ]; then
        expected=""
    else
        expected="MIG-b4b2228d-6933-5839-bc0e-41ab9edb61c6=$uuid"
    fi
    map=$(kubectl -n "$TENANT_NS" get pod dra-fits -o go-template='{{index .metadata.annotations "miggate.io/device-map"}}')
    local annotations
    annotations=$(kubectl -n "$TENANT_NS" get pod dra-fits -o jsonpath='{.metadata.annotations}')
    [[ "$annotations" == *'"miggate.io/device-map"'* ]] || fail "pod dra-fits has no miggate.io/device-map"
    [ "$map" = "$expected" ] || fail "device map '$map', expected '$expected' (allocated $device)"
    kubectl -n "$TENANT_NS" delete pod dra-fits --grace-period=0 --force --wait=false >/dev/null 2>&1
    kubectl delete -f <(fixture dra-driver.yaml NODE="$E2E_NODE") --wait=false >/dev/null 2>&1 || true
}
