//! Why the install cannot be written, and why an address range is not the API server's CIDR.

use std::fmt;
use std::net::Ipv4Addr;

use ipnet::IpNet;

use super::or_unknown;

/// Why the deploy manifests cannot be written ([`Error::Deploy`]).
///
/// [`Error::Deploy`]: super::Error::Deploy
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeployProblem {
    /// No binder, or one that is empty or holds a control character.
    #[error(
        "the binders (schedulers' user names) must be at least one, each non-empty, without control characters"
    )]
    Binders,
    /// A CRD that cannot be written as JSON.
    #[error("{0}")]
    Json(serde_json::Error),
    /// An object its kind's API type does not read or write.
    #[error("{object}: {error}")]
    Typed {
        /// The object.
        object: ObjectName,
        /// serde_json's error.
        error: serde_json::Error,
    },
    /// An object with a field its kind's API type drops.
    #[error("{object}: the typed kind does not keep every field written (a misspelt or unknown field?)")]
    FieldsDropped {
        /// The object.
        object: ObjectName,
    },
    /// An object that cannot be written as YAML.
    #[error("{0}")]
    Yaml(serde_saphyr::SerializeError),
}

/// An object of the install as messages name it: `kind name`, `?` for either it lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectName {
    /// Its `kind`.
    pub kind: Option<String>,
    /// Its `metadata.name`.
    pub name: Option<String>,
}

impl fmt::Display for ObjectName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}",
            or_unknown(self.kind.as_deref()),
            or_unknown(self.name.as_deref())
        )
    }
}

/// Why an address range is not a CIDR the API server's addresses can be given as
/// ([`Error::Cidr`]), each with what to write instead where there is one.
///
/// [`Error::Cidr`]: super::Error::Cidr
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BadCidr {
    /// Not an address and a prefix length.
    #[error("is not a CIDR: an address and a prefix length, such as 10.0.0.0/24, 10.0.0.7/32 or fd00::/64")]
    NotCidr,
    /// An IPv4-mapped IPv6 range.
    #[error("is an IPv4-mapped IPv6 range, which Kubernetes does not take: write the IPv4 range (of {v4})")]
    Ipv4Mapped {
        /// The IPv4 address it maps.
        v4: Ipv4Addr,
    },
    /// An address with host bits past the prefix.
    #[error("has host bits set: its network is {network}; for the one address write {address}")]
    HostBits {
        /// The range's network.
        network: IpNet,
        /// The address alone, as a range.
        address: IpNet,
    },
    /// A range written otherwise than Kubernetes keeps it.
    #[error("is not in canonical form: write {network}")]
    NotCanonical {
        /// The range as Kubernetes writes it.
        network: IpNet,
    },
    /// A range named twice.
    #[error("is named twice (entries {first} and {second}): name each range once")]
    Twice {
        /// The first entry naming it, from 1.
        first: usize,
        /// The second, from 1.
        second: usize,
    },
}
