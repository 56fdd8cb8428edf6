//! The few cert-manager (`cert-manager.io/v1`) shapes the install uses: an `Issuer` and a
//! `Certificate`. cert-manager's types are not in k8s-openapi; these carry exactly the fields
//! written, and refuse any other, so a misspelt field fails the build's tests instead of
//! being dropped.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

/// A cert-manager `Issuer`: self-signed (the root) or a CA (signing with the root's key).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Issuer {
    /// `cert-manager.io/v1`.
    pub api_version: String,
    /// `Issuer`.
    pub kind: String,
    /// Name and namespace.
    pub metadata: ObjectMeta,
    /// Which kind of issuer.
    pub spec: IssuerSpec,
}

/// An issuer's kind: exactly one of the two is set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IssuerSpec {
    /// Self-signed: signs each certificate with its own key (only the CA's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_signed: Option<serde_json::Map<String, serde_json::Value>>,
    /// A CA whose certificate and key are in a Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<CaIssuer>,
}

/// The Secret holding a CA issuer's certificate and key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CaIssuer {
    /// The Secret's name, in the issuer's namespace.
    pub secret_name: String,
}

/// A cert-manager `Certificate`: what to issue, into which Secret, by which issuer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Certificate {
    /// `cert-manager.io/v1`.
    pub api_version: String,
    /// `Certificate`.
    pub kind: String,
    /// Name and namespace.
    pub metadata: ObjectMeta,
    /// The certificate asked for.
    pub spec: CertificateSpec,
}

/// The fields of a `Certificate` the install sets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CertificateSpec {
    /// Whether this is a CA certificate.
    #[serde(default, rename = "isCA", skip_serializing_if = "Option::is_none")]
    pub is_ca: Option<bool>,
    /// The subject's common name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub common_name: Option<String>,
    /// Subject alternative DNS names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_names: Option<Vec<String>>,
    /// The Secret the key pair (and `ca.crt`) is written to.
    pub secret_name: String,
    /// Lifetime (Go duration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    /// Renew this long before expiry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renew_before: Option<String>,
    /// Key usages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usages: Option<Vec<String>>,
    /// The key's algorithm, size and rotation.
    pub private_key: PrivateKey,
    /// Who signs it.
    pub issuer_ref: IssuerRef,
}

/// The private key of a certificate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PrivateKey {
    /// `ECDSA`, `RSA` or `Ed25519`.
    pub algorithm: String,
    /// Key size in bits.
    pub size: u32,
    /// `Always`: a new key on each renewal.
    pub rotation_policy: String,
}

/// A reference to an issuer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IssuerRef {
    /// The issuer's name.
    pub name: String,
    /// `Issuer` (namespaced) or `ClusterIssuer`.
    pub kind: String,
    /// `cert-manager.io`.
    pub group: String,
}
