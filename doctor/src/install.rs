//! What the doctor knows of an install beyond its names (`miggate_wire::install`): the webhook
//! that gates restores, and the probe's pod and the checkpoint it names. Both the reads and the
//! checks use them.

use k8s_openapi::api::admissionregistration::v1::{ValidatingWebhook, ValidatingWebhookConfiguration};

/// The name of the webhook that judges restore pods at creation.
pub const RESTORE_WEBHOOK: &str = "restore.miggate.io";

/// The name the probe pod is given (a dry run stores nothing, so it never collides).
pub const PROBE_POD: &str = "miggate-doctor-probe";

/// The checkpoint the probe restores: no such checkpoint should exist, so the webhook refuses
/// it as `checkpoint-not-found`.
pub const PROBE_CHECKPOINT: &str = "miggate-doctor-probe-no-such-checkpoint";

/// The restore webhook of miggate's validating configuration.
pub fn restore_webhook(config: &ValidatingWebhookConfiguration) -> Option<&ValidatingWebhook> {
    config
        .webhooks
        .iter()
        .flatten()
        .find(|w| w.name == RESTORE_WEBHOOK)
}
