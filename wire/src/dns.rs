//! Kubernetes' object names (`k8s.io/apimachinery/pkg/util/validation`), one home for every
//! crate that checks a name before it reaches the API server: the CRDs' readers, the peer's
//! references, and the flags that name a Secret, a namespace or a webhook configuration.

/// The longest DNS-1123 label.
pub const LABEL_MAX: usize = 63;

/// Whether `name` is a DNS-1123 subdomain, what Kubernetes names most objects by
/// (`validation.IsDNS1123Subdomain`): dot-separated parts of lowercase letters, digits and
/// `-`, each starting and ending with a letter or digit, at most 253 bytes in all. Kubernetes'
/// regex bounds only the whole, so one part may be longer than a label's 63.
pub fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= 253 && name.split('.').all(is_subdomain_part)
}

/// One dot-separated part of a subdomain: a label's characters, of any length.
pub fn is_subdomain_part(part: &str) -> bool {
    let b = part.as_bytes();
    let inner = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    b.first().is_some_and(inner) && b.last().is_some_and(inner) && b.iter().all(|c| inner(c) || *c == b'-')
}

/// Whether `name` is a DNS-1123 label, checked the way the schema's pattern checks it.
pub fn is_dns_label(name: &str) -> bool {
    let b = name.as_bytes();
    let inner = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty()
        && b.len() <= LABEL_MAX
        && b.first().is_some_and(inner)
        && b.last().is_some_and(inner)
        && b.iter().all(|c| inner(c) || *c == b'-')
}
