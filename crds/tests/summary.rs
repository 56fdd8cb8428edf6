//! The summary `kubectl get` shows, for every recorded manifest in `testdata/manifests/`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use miggate_crds::Summary;

#[test]
fn summaries_of_the_recorded_manifests() {
    insta::glob!("../../testdata/manifests", "*.{yaml,json}", |path| {
        let text = std::fs::read_to_string(path).unwrap();
        let manifest = miggate_compat::from_str(&text).unwrap();
        insta::assert_yaml_snapshot!(Summary::of(&manifest));
    });
}
