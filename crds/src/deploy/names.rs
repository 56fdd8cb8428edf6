//! The install's names, from [`miggate_wire::install`].

pub use miggate_wire::install::{
    CERT_MANAGER_SECRET, CERT_SECRET, MUTATING_CONFIGURATIONS, NAMESPACE, NODE_NAMESPACE, PUBLISHER,
    RECOVERY_HOST_PATH, VALIDATING_CONFIGURATION, WEBHOOK,
};
