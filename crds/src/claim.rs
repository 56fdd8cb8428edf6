//! A checkpoint's GPU shape as a DRA `ResourceClaimTemplate` (`resource.k8s.io/v1`), so the
//! scheduler itself places a restore where the checkpoint's devices exist.
//!
//! One request per device class of the checkpoint, each `ExactCount` of the checkpoint's count:
//! MIG slices by (product, profile) through the NVIDIA DRA driver's `mig.nvidia.com` DeviceClass,
//! whole GPUs by product through `gpu.nvidia.com`. Each request's CEL selector names the class
//! by the driver's attributes (`profile`, `productName`, the same names in every driver release
//! the inventory reader knows) and the driver versions the checks require: `driverVersion` equal
//! to the checkpoint's (the `driver-version` check) and `cudaDriverVersion` at least the
//! checkpoint's (a CUDA driver runs what an older one compiled). Versions are written as the
//! driver publishes them, semver-normalised (`580.82.07` is `580.82.7`).
//!
//! No `matchAttribute` constraint is emitted: one claim's devices come from one node's pool
//! (the driver is node-local), so they already share a driver and CUDA version, and a
//! checkpoint's slices need not share a parent GPU on restore (cuda-checkpoint maps devices one
//! by one; `docs/steering.md` says why).

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{
    CELDeviceSelector, DeviceClaim, DeviceRequest, DeviceSelector, ExactDeviceRequest, ResourceClaimSpec,
    ResourceClaimTemplate, ResourceClaimTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use miggate_compat::{DeviceKind, GpuManifest, SliceShape};
use miggate_wire::dra::DRIVER as DRA_DRIVER;

use crate::error::{Error, NoClaim};

pub use miggate_wire::dra::{GPU_CLASS, MIG_CLASS};
/// The longest text (a product name, a profile) put in a selector: far above any real one.
const MAX_TEXT_BYTES: usize = 256;

/// What a claim asks for: one request per device class of a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRequest {
    /// The request's name in the claim (a DNS label): `mig-3g-40gb`, `gpu`.
    pub name: String,
    /// [`MIG_CLASS`] or [`GPU_CLASS`].
    pub device_class: &'static str,
    /// How many devices of the class.
    pub count: usize,
    /// The product name every device of the class carries.
    pub product: String,
    /// The MIG profile, for slices.
    pub profile: Option<String>,
    /// The CEL selector.
    pub selector: String,
}

/// The requests a checkpoint's devices make, in a stable order: slices by (product, profile),
/// then whole GPUs by product.
///
/// An error when the checkpoint cannot be expressed as classes: devices not recorded, a device
/// whose kind or slice shape is unknown, a device without a product name, or a text a selector
/// cannot safely hold.
pub fn requests(manifest: &GpuManifest) -> Result<Vec<ClaimRequest>, Error> {
    let nvidia = manifest.nvidia.as_ref().ok_or(NoClaim::NoNvidia)?;
    let devices = nvidia.devices.as_deref().ok_or(NoClaim::DevicesUnrecorded)?;
    if devices.is_empty() {
        return Err(NoClaim::NoDevice.into());
    }
    let versions = version_clauses(
        nvidia.driver_version.as_ref().map(|v| v.as_str()),
        nvidia.cuda_driver_version.as_ref().map(|v| v.as_str()),
    )?;
    let mut classes: BTreeMap<Class, usize> = BTreeMap::new();
    for (i, device) in devices.iter().enumerate() {
        let product = device.model().ok_or(NoClaim::NoProduct { index: i })?;
        let key = match (device.kind(), device.slice_shape()) {
            (DeviceKind::Slice, Some(SliceShape::Known(profile))) => Class::Slice {
                product: product.to_string(),
                profile: profile.to_string(),
            },
            (DeviceKind::Slice, _) => {
                return Err(NoClaim::UnknownProfile { index: i }.into());
            }
            (DeviceKind::Whole, _) => Class::Whole {
                product: product.to_string(),
            },
            (DeviceKind::Unknown, _) => {
                return Err(NoClaim::UnknownKind { index: i }.into());
            }
        };
        *classes.entry(key).or_default() += 1;
    }
    let mut out: Vec<ClaimRequest> = Vec::with_capacity(classes.len());
    for (class, count) in classes {
        let (device_class, base, product, profile, mut clauses) = match class {
            Class::Slice { product, profile } => {
                let product_text = cel_string(&product)?;
                let clauses = vec![
                    format!(
                        "device.attributes['{DRA_DRIVER}'].profile == {}",
                        cel_string(&profile)?
                    ),
                    format!("device.attributes['{DRA_DRIVER}'].productName == {product_text}"),
                ];
                (
                    MIG_CLASS,
                    format!("mig-{profile}"),
                    product,
                    Some(profile),
                    clauses,
                )
            }
            Class::Whole { product } => {
                let clauses = vec![format!(
                    "device.attributes['{DRA_DRIVER}'].productName == {}",
                    cel_string(&product)?
                )];
                (GPU_CLASS, "gpu".to_string(), product, None, clauses)
            }
        };
        clauses.extend(versions.iter().cloned());
        let name = unique_name(&base, &out);
        out.push(ClaimRequest {
            name,
            device_class,
            count,
            product,
            profile,
            selector: clauses.join(" && "),
        });
    }
    Ok(out)
}

/// A device class of a checkpoint, as its devices are grouped into requests. The derived
/// order is the requests' order: slices by (product, profile), then whole GPUs by product.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Class {
    /// MIG slices of one profile on one product.
    Slice { product: String, profile: String },
    /// Whole GPUs of one product.
    Whole { product: String },
}

/// The prefix of the template name the steering webhook gives a DRA restore pod that asks
/// for steering: `miggate-<checkpoint>` in the pod's namespace ([`template_name`]).
pub const TEMPLATE_PREFIX: &str = "miggate-";

/// The name of the template a restore pod of checkpoint `checkpoint` is steered to:
/// `miggate-<checkpoint>`. `None` when that would exceed an object name's 253 characters.
/// The user makes it: `kubectl get gpucheckpoint -n NS CKPT -o yaml | miggate claim -
/// --name miggate-CKPT | kubectl apply -n NS -f -`.
pub fn template_name(checkpoint: &str) -> Option<String> {
    let name = format!("{TEMPLATE_PREFIX}{checkpoint}");
    (name.len() <= 253).then_some(name)
}

/// The `ResourceClaimTemplate` named `name` for the checkpoint (no namespace: the caller's
/// `kubectl -n`, or the restore pod's).
pub fn claim_template(name: &str, manifest: &GpuManifest) -> Result<ResourceClaimTemplate, Error> {
    if !crate::schema::is_dns_subdomain(name) {
        return Err(NoClaim::BadName {
            name: name.to_string(),
        }
        .into());
    }
    let requests = requests(manifest)?
        .into_iter()
        .map(|r| {
            Ok(DeviceRequest {
                name: r.name,
                exactly: Some(ExactDeviceRequest {
                    device_class_name: r.device_class.to_string(),
                    allocation_mode: Some("ExactCount".to_string()),
                    count: Some(i64::try_from(r.count).map_err(|_| NoClaim::TooMany { count: r.count })?),
                    selectors: Some(vec![DeviceSelector {
                        cel: Some(CELDeviceSelector {
                            expression: r.selector,
                        }),
                    }]),
                    ..ExactDeviceRequest::default()
                }),
                ..DeviceRequest::default()
            })
        })
        .collect::<Result<Vec<_>, Error>>()?;
    Ok(ResourceClaimTemplate {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/managed-by".to_string(),
                "miggate".to_string(),
            )])),
            ..ObjectMeta::default()
        },
        spec: ResourceClaimTemplateSpec {
            metadata: None,
            spec: ResourceClaimSpec {
                devices: Some(DeviceClaim {
                    requests: Some(requests),
                    ..DeviceClaim::default()
                }),
            },
        },
    })
}

/// The version clauses of every request: the driver equal to the checkpoint's, CUDA at least
/// the checkpoint's. A version not recorded adds no clause (the check reports it as unknown).
fn version_clauses(driver: Option<&str>, cuda: Option<&str>) -> Result<Vec<String>, Error> {
    let mut out = Vec::new();
    if let Some(v) = driver {
        out.push(format!(
            "device.attributes['{DRA_DRIVER}'].driverVersion.compareTo(semver('{}')) == 0",
            semver(v, "driver")?
        ));
    }
    if let Some(v) = cuda {
        out.push(format!(
            "device.attributes['{DRA_DRIVER}'].cudaDriverVersion.compareTo(semver('{}')) >= 0",
            semver(v, "CUDA driver")?
        ));
    }
    Ok(out)
}

/// A version as the DRA driver publishes it: numbers without leading zeros, three of them
/// (`580.82.07` → `580.82.7`, `13.0` → `13.0.0`).
pub fn semver(version: &str, what: &'static str) -> Result<String, Error> {
    let parts: Vec<&str> = version.trim().split('.').collect();
    let numbers: Option<Vec<u64>> = parts
        .iter()
        .map(|p| {
            (!p.is_empty() && p.len() <= 9 && p.bytes().all(|b| b.is_ascii_digit()))
                .then(|| p.parse().ok())
                .flatten()
        })
        .collect();
    match numbers {
        Some(mut n) if (1..=3).contains(&n.len()) => {
            n.resize(3, 0);
            Ok(format!("{}.{}.{}", n[0], n[1], n[2]))
        }
        _ => Err(NoClaim::Version {
            what,
            version: version.to_string(),
        }
        .into()),
    }
}

/// `text` as a single-quoted CEL string. Refused when it holds a control character or is
/// longer than any real name, rather than smuggling either into an expression.
fn cel_string(text: &str) -> Result<String, Error> {
    if text.len() > MAX_TEXT_BYTES
        || text
            .chars()
            .any(|c| c.is_control() || miggate_compat::escape::is_hazard(c))
    {
        return Err(NoClaim::Unselectable {
            text: text.to_string(),
            limit: MAX_TEXT_BYTES,
        }
        .into());
    }
    Ok(format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'")))
}

/// A request name (a DNS label) from `base`, unique among `taken`: lowercased, every other
/// character a `-`, at most 63 bytes with room for a `-N` suffix.
fn unique_name(base: &str, taken: &[ClaimRequest]) -> String {
    let mut name: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    name.truncate(56);
    let name = name.trim_matches('-').to_string();
    let name = if name.is_empty() {
        "device".to_string()
    } else {
        name
    };
    if !taken.iter().any(|r| r.name == name) {
        return name;
    }
    (2..)
        .map(|n| format!("{name}-{n}"))
        .find(|candidate| !taken.iter().any(|r| &r.name == candidate))
        .unwrap_or(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("580.82.07", Some("580.82.7"))]
    #[case("13.0", Some("13.0.0"))]
    #[case("580", Some("580.0.0"))]
    #[case("570.86.15", Some("570.86.15"))]
    #[case("580.82.07-beta", None)]
    #[case("", None)]
    #[case("1.2.3.4", None)]
    #[case("5 80", None)]
    fn versions_are_written_as_the_driver_publishes_them(#[case] text: &str, #[case] expected: Option<&str>) {
        assert_eq!(semver(text, "driver").ok().as_deref(), expected);
    }

    #[rstest]
    #[case("NVIDIA H100 80GB HBM3", Some("'NVIDIA H100 80GB HBM3'"))]
    #[case("it's", Some(r"'it\'s'"))]
    #[case(r"a\b", Some(r"'a\\b'"))]
    #[case("x' || true || '", Some(r"'x\' || true || \''"))]
    #[case("bad\nname", None)]
    #[case("bidi\u{202e}", None)]
    fn texts_are_quoted_or_refused(#[case] text: &str, #[case] expected: Option<&str>) {
        assert_eq!(cel_string(text).ok().as_deref(), expected);
    }
}
