//! Who this webhook is, as the API server reports it: the value it marks the Secret with
//! ([`WRITTEN_BY`](crate::material::WRITTEN_BY)), so a Secret someone else wrote is never
//! adopted. It is the UID a `SelfSubjectReview` reports: for a service account's token, the
//! ServiceAccount's own UID, made by the API server when the account is created, so no one who
//! plants a Secret before the install can know it. Only a user without a UID (a static token,
//! a client certificate: outside a cluster) falls back to its name.

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use kube::Api;
use kube::api::PostParams;

use crate::error::Error;

/// Asks the API server who the client is; the marker this webhook writes.
pub(crate) async fn learn(client: kube::Client) -> Result<String, Error> {
    let reviews: Api<SelfSubjectReview> = Api::all(client);
    let review = reviews
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .map_err(|source| Error::Identity {
            source: Box::new(source),
        })?;
    match identity(&review) {
        Some(Identity::Uid(uid)) => Ok(uid),
        Some(Identity::Name(name)) => {
            // Anyone can know a name; said once, at start, so an admin can see the guard is
            // weaker here.
            tracing::warn!(
                user = %name,
                "webhook certificates: the API server reports no UID for this webhook's user; the Secret is marked with its name, which others can know"
            );
            Ok(name)
        }
        None => Err(Error::NoIdentity),
    }
}

/// What a review says of the user.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Identity {
    /// Its UID.
    Uid(String),
    /// Its name, when it has no UID.
    Name(String),
}

/// The user's UID, else its name; an empty one counts as none.
fn identity(review: &SelfSubjectReview) -> Option<Identity> {
    let user = review.status.as_ref()?.user_info.as_ref()?;
    let given = |s: &Option<String>| s.as_deref().filter(|s| !s.is_empty()).map(str::to_string);
    given(&user.uid)
        .map(Identity::Uid)
        .or_else(|| given(&user.username).map(Identity::Name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::authentication::v1::{SelfSubjectReviewStatus, UserInfo};
    use rstest::rstest;

    fn review(uid: Option<&str>, username: Option<&str>) -> SelfSubjectReview {
        SelfSubjectReview {
            status: Some(SelfSubjectReviewStatus {
                user_info: Some(UserInfo {
                    uid: uid.map(str::to_string),
                    username: username.map(str::to_string),
                    ..UserInfo::default()
                }),
            }),
            ..SelfSubjectReview::default()
        }
    }

    #[rstest]
    #[case::service_account(Some("5c1e"), Some("system:serviceaccount:ns:sa"), Some(Identity::Uid("5c1e".into())))]
    #[case::no_uid(None, Some("admin"), Some(Identity::Name("admin".into())))]
    #[case::empty_uid(Some(""), Some("admin"), Some(Identity::Name("admin".into())))]
    #[case::no_one(Some(""), None, None)]
    fn the_uid_else_the_name(
        #[case] uid: Option<&str>,
        #[case] username: Option<&str>,
        #[case] want: Option<Identity>,
    ) {
        assert_eq!(identity(&review(uid, username)), want);
    }

    #[test]
    fn a_review_without_a_status_names_no_one() {
        assert_eq!(identity(&SelfSubjectReview::default()), None);
    }
}
