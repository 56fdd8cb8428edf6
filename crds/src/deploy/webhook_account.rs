//! What the webhook's own account may do with the rights self-managed certificates give it,
//! held by the API server. RBAC grants it `patch` on miggate's webhook configurations and
//! writes to one Secret, but cannot say which fields: a stolen token of that account could add
//! a webhook on Secrets pointed at any `url`, widen one, or switch one off, and any account
//! that may create Secrets in the webhook's namespace could plant the CA every configuration
//! then trusts. These two policies close both.

use serde_json::json;

use super::Object;
use super::names::{CERT_SECRET, NAMESPACE, WEBHOOK};
use super::policies::{cel_string, policy};
use crate::error::Error;

/// Both policies, with their bindings.
pub(super) fn all() -> Result<Vec<Object>, Error> {
    let mut out = configurations()?;
    out.extend(certificates()?);
    Ok(out)
}

fn webhook_user() -> String {
    format!("system:serviceaccount:{NAMESPACE}:{WEBHOOK}")
}

/// `a.field` and `b.field` are the same: absent in both, or present in both and equal.
fn same(a: &str, b: &str, field: &str) -> String {
    format!("has({a}.{field}) == has({b}.{field}) && (!has({a}.{field}) || {a}.{field} == {b}.{field})")
}

/// Every field of a webhook but its `clientConfig.caBundle`, as of API version v1 (the
/// mutating one's `reinvocationPolicy` too).
const WEBHOOK_FIELDS: [&str; 11] = [
    "rules",
    "failurePolicy",
    "matchPolicy",
    "namespaceSelector",
    "objectSelector",
    "sideEffects",
    "timeoutSeconds",
    "admissionReviewVersions",
    "matchConditions",
    "reinvocationPolicy",
    "clientConfig.url",
];

/// The metadata an update could use to hand the configuration to a garbage-collected owner,
/// hold its deletion, or change what selects it.
const METADATA_FIELDS: [&str; 4] = ["labels", "annotations", "ownerReferences", "finalizers"];

/// `miggate-webhook-configurations`: an update of a webhook configuration by the webhook's
/// account changes each webhook's `clientConfig.caBundle` and nothing else (every other field
/// of every webhook, and the metadata an owner or finalizer could use, compared with the old
/// object; webhooks paired by name, which the API server keeps unique).
pub fn configurations() -> Result<Vec<Object>, Error> {
    let user = webhook_user();
    let words =
        format!("{user} changes nothing of a webhook configuration but each webhook's clientConfig.caBundle");
    let metadata: Vec<String> = METADATA_FIELDS
        .iter()
        .map(|f| same("object.metadata", "oldObject.metadata", f))
        .collect();
    let mut webhook: Vec<String> = vec![
        "o.name == w.name".into(),
        same("o.clientConfig", "w.clientConfig", "service"),
    ];
    webhook.extend(WEBHOOK_FIELDS.iter().map(|f| same("o", "w", f)));
    let webhooks = format!(
        "has(object.webhooks) == has(oldObject.webhooks) && (!has(object.webhooks) || size(object.webhooks) == size(oldObject.webhooks) && object.webhooks.all(w, oldObject.webhooks.exists(o, {})))",
        webhook.join(" && ")
    );
    policy(
        "miggate-webhook-configurations",
        json!({
            "failurePolicy": "Fail",
            "matchConditions": [{"name": "the-webhook-account",
                "expression": format!("request.userInfo.username == {}", cel_string(&user))}],
            "matchConstraints": {"resourceRules": [{
                "apiGroups": ["admissionregistration.k8s.io"], "apiVersions": ["*"], "operations": ["UPDATE"],
                "resources": ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"]}]},
            "validations": [
                {"expression": metadata.join(" && "),
                 "message": format!("{words}: not its labels, annotations, owners or finalizers"),
                 "reason": "Forbidden"},
                {"expression": webhooks,
                 "message": format!("{words}: no webhook added, removed, renamed or otherwise changed"),
                 "reason": "Forbidden"},
            ],
        }),
    )
}

/// `miggate-webhook-certs`: in the webhook's namespace, its account writes no Secret but
/// [`CERT_SECRET`]; any other account creates that one only empty (Opaque, not immutable, no
/// `miggate.io/` annotations, as the install ships it) and never changes its data, its
/// immutability or those annotations. Deleting it stays open: that is how an admin rotates.
pub fn certificates() -> Result<Vec<Object>, Error> {
    let user = webhook_user();
    let only = format!("only miggate's webhook writes the certificates in Secret {CERT_SECRET}");
    let marks = |var: &str| {
        format!(
            "{var} != null && has({var}.metadata.annotations) ? {var}.metadata.annotations.filter(k, k.startsWith('miggate.io/')).map(k, k + '=' + {var}.metadata.annotations[k]) : []"
        )
    };
    policy(
        "miggate-webhook-certs",
        json!({
            "failurePolicy": "Fail",
            "matchConstraints": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}},
                "resourceRules": [{
                    "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                    "resources": ["secrets"]}]},
            "variables": [
                {"name": "webhook", "expression": format!("request.userInfo.username == {}", cel_string(&user))},
                {"name": "certs", "expression": format!("request.name == {}", cel_string(CERT_SECRET))},
                {"name": "marks", "expression": marks("object")},
                {"name": "old_marks", "expression": marks("oldObject")},
                {"name": "immutable", "expression": "has(object.immutable) && object.immutable"},
            ],
            "validations": [
                {"expression": "!variables.webhook || variables.certs",
                 "message": format!("{user} writes no Secret but {CERT_SECRET}"),
                 "reason": "Forbidden"},
                {"expression": "variables.webhook || !variables.certs || request.operation != 'CREATE' || ((!has(object.data) || size(object.data) == 0) && (!has(object.type) || object.type == 'Opaque') && !variables.immutable && size(variables.marks) == 0)",
                 "message": format!("{only}: another account may create it only empty (type Opaque, not immutable, no miggate.io/ annotations); delete it to have the webhook make new ones"),
                 "reason": "Forbidden"},
                {"expression": format!("variables.webhook || !variables.certs || request.operation != 'UPDATE' || ({} && variables.immutable == (has(oldObject.immutable) && oldObject.immutable) && variables.marks.all(m, m in variables.old_marks) && variables.old_marks.all(m, m in variables.marks))", same("object", "oldObject", "data")),
                 "message": format!("{only}: another account may not change its data, make it immutable or change its miggate.io/ annotations; delete it to have the webhook make new ones"),
                 "reason": "Forbidden"},
            ],
        }),
    )
}
