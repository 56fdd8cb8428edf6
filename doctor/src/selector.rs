//! A `LabelSelector` matched against an object's labels, as the API server matches a webhook's
//! `namespaceSelector` or a policy binding's: `matchLabels` and every `matchExpressions`
//! requirement must hold. An operator the API server does not know matches nothing, as it
//! would refuse the selector.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Whether `selector` selects an object with `labels`; `None` (no selector) selects everything.
pub fn matches(selector: Option<&LabelSelector>, labels: &BTreeMap<String, String>) -> bool {
    let Some(selector) = selector else {
        return true;
    };
    let by_labels = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let by_expressions = selector.match_expressions.iter().flatten().all(|e| {
        let value = labels.get(&e.key);
        let values = e.values.as_deref().unwrap_or_default();
        match e.operator.as_str() {
            "In" => value.is_some_and(|v| values.contains(v)),
            "NotIn" => value.is_none_or(|v| !values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            _ => false,
        }
    });
    by_labels && by_expressions
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[rstest]
    #[case::none(None, &[("a", "1")], true)]
    #[case::empty(Some("{}"), &[], true)]
    #[case::labels_hold(Some(r#"{"matchLabels": {"a": "1"}}"#), &[("a", "1"), ("b", "2")], true)]
    #[case::labels_differ(Some(r#"{"matchLabels": {"a": "1"}}"#), &[("a", "2")], false)]
    #[case::not_in_absent(
        Some(r#"{"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}]}"#),
        &[],
        true
    )]
    #[case::not_in_listed(
        Some(r#"{"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}]}"#),
        &[("kubernetes.io/metadata.name", "kube-system")],
        false
    )]
    #[case::in_listed(Some(r#"{"matchExpressions": [{"key": "t", "operator": "In", "values": ["x"]}]}"#), &[("t", "x")], true)]
    #[case::in_absent(Some(r#"{"matchExpressions": [{"key": "t", "operator": "In", "values": ["x"]}]}"#), &[], false)]
    #[case::exists(Some(r#"{"matchExpressions": [{"key": "t", "operator": "Exists"}]}"#), &[("t", "")], true)]
    #[case::does_not_exist(Some(r#"{"matchExpressions": [{"key": "t", "operator": "DoesNotExist"}]}"#), &[("t", "")], false)]
    #[case::unknown_operator(Some(r#"{"matchExpressions": [{"key": "t", "operator": "Gt", "values": ["1"]}]}"#), &[("t", "2")], false)]
    fn selectors_match_as_the_api_server_does(
        #[case] selector: Option<&str>,
        #[case] pairs: &[(&str, &str)],
        #[case] selected: bool,
    ) {
        let selector: Option<LabelSelector> = selector.map(|s| serde_json::from_str(s).unwrap());
        assert_eq!(matches(selector.as_ref(), &labels(pairs)), selected);
    }
}
