//! The Secret's judgement, one row per state a Secret can be found in: what is kept, what is
//! replaced and why.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, SystemTime};

use miggate_certs::material::{
    CA_BUNDLE, CA_CRT, CA_KEY, Cert, Change, MAX_VALUE_BYTES, PREVIOUS_CA_UNTIL, Raw, TLS_CRT, TLS_KEY,
    Unusable, Wanted, Why, bundle_certs, judge, pem_of,
};
use miggate_certs::mint;
use miggate_certs::{Pair, PairError, ServingPair};
use rstest::rstest;

const DAY: Duration = Duration::from_secs(86_400);
/// This webhook's identity: the UID of its service account.
const WRITER: &str = "4f1c2a9e-5b7d-4c1e-9a3f-0d6e8b2c7a15";
const NAMES: [&str; 2] = [
    "miggate-webhook.miggate-system.svc",
    "miggate-webhook.miggate-system.svc.cluster.local",
];

fn wanted() -> Wanted {
    Wanted {
        names: NAMES.iter().map(|s| s.to_string()).collect(),
        ca_lifetime: 3650 * DAY,
        serving_lifetime: 365 * DAY,
        overlap: Duration::from_secs(600),
    }
}

fn now() -> SystemTime {
    SystemTime::now()
}

fn not_after(pair: &Pair) -> SystemTime {
    Cert::from_pem(pair.cert_pem.as_bytes()).unwrap().not_after
}

fn ca() -> Pair {
    mint::authority(now(), 3650 * DAY).unwrap()
}

fn leaf(ca: &Pair, names: &[&str], issued: SystemTime, life: Duration) -> Pair {
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    mint::serving(ca, &names, issued, life, not_after(ca)).unwrap()
}

fn raw(ca: &Pair, leaf: &Pair) -> Raw {
    let mut raw = Raw::default();
    raw.data.insert(CA_CRT.into(), ca.cert_pem.clone().into_bytes());
    raw.data.insert(CA_KEY.into(), ca.key_pem.clone().into_bytes());
    raw.data
        .insert(TLS_CRT.into(), leaf.cert_pem.clone().into_bytes());
    raw.data.insert(TLS_KEY.into(), leaf.key_pem.clone().into_bytes());
    raw.data
        .insert(CA_BUNDLE.into(), ca.cert_pem.clone().into_bytes());
    raw.written_by = Some(WRITER.into());
    raw
}

fn good() -> (Pair, Pair, Raw) {
    let ca = ca();
    let leaf = leaf(&ca, &NAMES, now(), 365 * DAY);
    let raw = raw(&ca, &leaf);
    (ca, leaf, raw)
}

#[test]
fn a_usable_secret_is_kept_as_it_is() {
    let (ca, leaf, raw) = good();
    let judged = judge(&raw, &wanted(), now(), None, WRITER).unwrap();
    assert_eq!(judged.changes, vec![]);
    assert_eq!(judged.contents.ca, ca);
    assert_eq!(judged.contents.leaf, leaf);
    assert_eq!(judged.contents.data(), raw.data);
    assert!(judged.causes.is_empty());
    // What is served is the Secret's pair, read once.
    let serving = &judged.contents.serving;
    assert_eq!(
        *serving,
        ServingPair::from_pem(leaf.cert_pem.as_bytes(), leaf.key_pem.as_bytes()).unwrap()
    );
    assert_eq!(*serving.leaf(), cert(&leaf));
    assert_eq!(serving.chain().len(), 1);
    assert!(serving.certified_key().keys_match().is_ok());
}

/// Each way the Secret can be broken, and the change it gets.
#[rstest]
#[case::empty(&|r: &mut Raw| r.data.clear(), Change::Ca(Why::Missing))]
#[case::no_ca_key(&|r: &mut Raw| { r.data.remove(CA_KEY); }, Change::Ca(Why::Missing))]
#[case::garbage_ca(&|r: &mut Raw| { r.data.insert(CA_CRT.into(), b"garbage".to_vec()); }, Change::Ca(Why::Unreadable))]
#[case::garbage_ca_key(&|r: &mut Raw| { r.data.insert(CA_KEY.into(), b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n".to_vec()); }, Change::Ca(Why::Unreadable))]
#[case::ca_key_of_another(&|r: &mut Raw| { r.data.insert(CA_KEY.into(), ca().key_pem.into_bytes()); }, Change::Ca(Why::KeyMismatch))]
#[case::leaf_as_ca(&|r: &mut Raw| { let l = r.data[TLS_CRT].clone(); let k = r.data[TLS_KEY].clone(); r.data.insert(CA_CRT.into(), l); r.data.insert(CA_KEY.into(), k); }, Change::Ca(Why::Unreadable))]
#[case::no_leaf(&|r: &mut Raw| { r.data.remove(TLS_CRT); }, Change::Serving(Why::Missing))]
#[case::garbage_leaf(&|r: &mut Raw| { r.data.insert(TLS_CRT.into(), b"\x1b[31mgarbage".to_vec()); }, Change::Serving(Why::Unreadable))]
#[case::leaf_key_of_another(&|r: &mut Raw| { r.data.insert(TLS_KEY.into(), ca().key_pem.into_bytes()); }, Change::Serving(Why::KeyMismatch))]
fn a_broken_secret_is_mended(#[case] break_it: &dyn Fn(&mut Raw), #[case] change: Change) {
    let (_, _, mut raw) = good();
    break_it(&mut raw);
    let judged = judge(&raw, &wanted(), now(), None, WRITER).unwrap();
    assert_eq!(judged.changes.first(), Some(&change), "{:?}", judged.changes);
    // The error behind it says the same, and names the key, never the content.
    let cause = judged.causes.first().unwrap();
    let (Change::Ca(why) | Change::Serving(why)) = change else {
        unreachable!()
    };
    assert_eq!(cause.why(), why, "{cause}");
    assert!(!cause.to_string().contains("PRIVATE KEY"), "{cause}");
    // Whatever was wrong, what is written judges clean.
    let written = Raw::from(&judged.contents);
    assert_eq!(
        judge(&written, &wanted(), now(), None, WRITER).unwrap().changes,
        vec![]
    );
}

#[rstest]
#[case::another_name(&["other.example.svc"], 0, 365, Why::WrongName)]
#[case::one_name_of_two(&[NAMES[0]], 0, 365, Why::WrongName)]
#[case::expired(&NAMES, 400, 365, Why::Expired)]
#[case::due(&NAMES, 300, 365, Why::Due)]
fn a_serving_certificate_is_reissued_from_the_same_ca(
    #[case] names: &[&str],
    #[case] issued_days_ago: u32,
    #[case] life_days: u32,
    #[case] why: Why,
) {
    let ca = ca();
    let leaf = leaf(&ca, names, now() - issued_days_ago * DAY, life_days * DAY);
    let judged = judge(&raw(&ca, &leaf), &wanted(), now(), None, WRITER).unwrap();
    assert_eq!(judged.changes, vec![Change::Serving(why)]);
    assert_eq!(judged.contents.ca, ca, "the CA stays");
    assert_ne!(judged.contents.leaf, leaf);
}

#[test]
fn a_serving_certificate_of_another_ca_is_untrusted() {
    let (_, _, mut raw) = good();
    let foreign = leaf(&ca(), &NAMES, now(), 365 * DAY);
    raw.data.insert(TLS_CRT.into(), foreign.cert_pem.into_bytes());
    raw.data.insert(TLS_KEY.into(), foreign.key_pem.into_bytes());
    let judged = judge(&raw, &wanted(), now(), None, WRITER).unwrap();
    assert_eq!(judged.changes, vec![Change::Serving(Why::Untrusted)]);
}

#[rstest]
#[case::expired(4000, Why::Expired)]
#[case::due(2500, Why::Due)]
fn an_old_ca_is_rotated_and_kept_in_the_bundle_while_valid(#[case] issued_days_ago: u32, #[case] why: Why) {
    let old = mint::authority(now() - issued_days_ago * DAY, 3650 * DAY).unwrap();
    let old_leaf = leaf(&old, &NAMES, now() - DAY, 300 * DAY);
    let judged = judge(&raw(&old, &old_leaf), &wanted(), now(), None, WRITER).unwrap();
    assert_eq!(judged.changes, vec![Change::Ca(why)]);
    let bundle = bundle_certs(judged.contents.bundle.as_bytes()).unwrap();
    let new_ca = Cert::from_pem(judged.contents.ca.cert_pem.as_bytes()).unwrap();
    assert_eq!(bundle[0], new_ca, "the new CA first");
    let old_cert = Cert::from_pem(old.cert_pem.as_bytes()).unwrap();
    let kept = bundle.contains(&old_cert);
    assert_eq!(
        kept,
        why == Why::Due,
        "an expired CA trusts nothing, so it is dropped"
    );
    assert_eq!(judged.contents.previous_until.is_some(), kept);
}

#[test]
fn a_deleted_secret_keeps_the_ca_this_replica_serves_until_the_overlap_ends() {
    let (old_ca, _, _) = good();
    let serving = Cert::from_pem(old_ca.cert_pem.as_bytes()).unwrap();
    let t0 = now();
    let judged = judge(&Raw::default(), &wanted(), t0, Some(&serving), WRITER).unwrap();
    assert_eq!(judged.changes, vec![Change::Ca(Why::Missing)]);
    let bundle = bundle_certs(judged.contents.bundle.as_bytes()).unwrap();
    assert_eq!(bundle.len(), 2);
    assert_eq!(bundle[1], serving);
    let until = judged.contents.previous_until.unwrap();
    assert_eq!(until, t0 + Duration::from_secs(600));

    // Read back within the overlap: kept. After it: the bundle is the new CA alone.
    let written = Raw::from(&judged.contents);
    let within = judge(&written, &wanted(), t0 + Duration::from_secs(60), None, WRITER).unwrap();
    assert_eq!(within.changes, vec![]);
    let after = judge(&written, &wanted(), t0 + Duration::from_secs(601), None, WRITER).unwrap();
    assert_eq!(after.changes, vec![Change::Bundle]);
    assert_eq!(bundle_certs(after.contents.bundle.as_bytes()).unwrap().len(), 1);
    assert_eq!(after.contents.previous_until, None);
}

#[rstest]
#[case::garbage(Some(b"not pem".to_vec()), None)]
#[case::missing(None, None)]
#[case::extra_ca_without_an_end(Some(format!("{}{}", ca().cert_pem, ca().cert_pem).into_bytes()), None)]
#[case::stale_annotation(None, Some("yesterday".to_string()))]
fn a_bundle_that_is_not_the_ca_is_rewritten(#[case] bundle: Option<Vec<u8>>, #[case] until: Option<String>) {
    let (ca, _, mut raw) = good();
    match bundle {
        Some(b) => raw.data.insert(CA_BUNDLE.into(), b),
        None => raw.data.remove(CA_BUNDLE),
    };
    raw.previous_until = until;
    let judged = judge(&raw, &wanted(), now(), None, WRITER).unwrap();
    assert_eq!(judged.changes, vec![Change::Bundle]);
    assert_eq!(
        judged.contents.bundle,
        pem_of(&Cert::from_pem(ca.cert_pem.as_bytes()).unwrap().der)
    );
    let _ = PREVIOUS_CA_UNTIL;
}

#[test]
fn the_debug_form_never_shows_a_key() {
    let (_, _, raw) = good();
    let judged = judge(&raw, &wanted(), now(), None, WRITER).unwrap();
    let shown = format!("{:?}", judged.contents);
    assert!(!shown.contains("PRIVATE KEY"), "{shown}");
}

/// A short lifetime is not due when made (the backdate is at most a tenth of it), and is due
/// with two thirds of it gone.
#[rstest]
#[case::a_minute(60)]
#[case::an_hour(3600)]
#[case::a_year(31_557_600)]
fn a_new_certificate_is_due_only_with_two_thirds_of_its_life_gone(#[case] secs: u64) {
    let life = Duration::from_secs(secs);
    let t0 = now();
    let ca = mint::authority(t0, life).unwrap();
    let cert = Cert::from_pem(ca.cert_pem.as_bytes()).unwrap();
    assert!(!cert.due_at(t0 + life / 2), "not due at half its life");
    assert!(cert.due_at(t0 + life * 7 / 10), "due past two thirds");
    assert!(cert.valid_at(t0));
}

fn cert(pair: &Pair) -> Cert {
    Cert::from_pem(pair.cert_pem.as_bytes()).unwrap()
}

fn bundle_of(pairs: &[&Pair]) -> Vec<u8> {
    pairs
        .iter()
        .map(|p| pem_of(&cert(p).der))
        .collect::<String>()
        .into_bytes()
}

fn until_text(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

/// A Secret whose data another wrote, however good it looks (a CA planted before the install,
/// with a serving certificate for the right names and a bundle of its own), is replaced whole:
/// nothing of it reaches the bundle, only the CA this replica serves from memory.
#[rstest]
#[case::no_marker(None, false)]
#[case::another_marker(Some("miggate"), false)]
#[case::no_marker_while_serving(None, true)]
#[case::empty_marker_while_serving(Some(""), true)]
fn a_foreign_secret_is_replaced_and_nothing_of_it_kept(#[case] marker: Option<&str>, #[case] serving: bool) {
    let (planted, _, mut raw) = good();
    let planted_too = ca();
    raw.data
        .insert(CA_BUNDLE.into(), bundle_of(&[&planted, &planted_too]));
    raw.previous_until = Some(until_text(now() + Duration::from_secs(300)));
    raw.written_by = marker.map(str::to_string);
    let mine = ca();
    let serving_ca = serving.then(|| cert(&mine));
    let judged = judge(&raw, &wanted(), now(), serving_ca.as_ref(), WRITER).unwrap();
    assert_eq!(judged.changes, vec![Change::Ca(Why::Foreign)]);
    assert_eq!(Why::Foreign.as_str(), "foreign");
    assert_ne!(judged.contents.ca, planted);
    let bundle = bundle_certs(judged.contents.bundle.as_bytes()).unwrap();
    assert!(
        !bundle.contains(&cert(&planted)),
        "the planted CA is never trusted"
    );
    assert!(!bundle.contains(&cert(&planted_too)), "nor any of its bundle");
    let want: Vec<Cert> = [Some(cert(&judged.contents.ca)), serving_ca]
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(bundle, want);
    assert_eq!(judged.contents.previous_until.is_some(), serving);
    assert_eq!(judged.contents.written_by, WRITER);
    // Written, it is ours: judged clean.
    let written = Raw::from(&judged.contents);
    assert_eq!(written.written_by.as_deref(), Some(WRITER));
    assert_eq!(
        judge(&written, &wanted(), now(), None, WRITER).unwrap().changes,
        vec![]
    );
}

/// No data: nothing to adopt or distrust, whoever made the (empty) Secret, as Helm does.
#[test]
fn an_empty_secret_without_a_marker_is_missing_not_foreign() {
    let judged = judge(&Raw::default(), &wanted(), now(), None, WRITER).unwrap();
    assert_eq!(judged.changes, vec![Change::Ca(Why::Missing)]);
}

/// What a Secret of ours may keep in its bundle, within an overlap: the current CA and one
/// earlier CA, valid, a CA by its basic constraints, never more.
#[rstest]
#[case::three_cas_cut_to_two(3, false, false, 2)]
#[case::a_leaf_dropped(1, true, false, 1)]
#[case::an_expired_ca_dropped(1, false, true, 1)]
#[case::a_leaf_before_a_ca(2, true, false, 2)]
fn the_kept_bundle_is_the_ca_and_at_most_one_earlier_ca(
    #[case] earlier_cas: usize,
    #[case] with_leaf: bool,
    #[case] with_expired: bool,
    #[case] kept: usize,
) {
    let (current, leaf, mut raw) = good();
    let earlier: Vec<Pair> = (1..earlier_cas).map(|_| ca()).collect();
    let expired = mint::authority(now() - 20 * DAY, 10 * DAY).unwrap();
    let mut pairs: Vec<&Pair> = vec![&current];
    if with_leaf {
        pairs.push(&leaf);
    }
    if with_expired {
        pairs.push(&expired);
    }
    pairs.extend(earlier.iter());
    raw.data.insert(CA_BUNDLE.into(), bundle_of(&pairs));
    raw.previous_until = Some(until_text(now() + Duration::from_secs(300)));
    let judged = judge(&raw, &wanted(), now(), None, WRITER).unwrap();
    assert_eq!(judged.changes, vec![Change::Bundle]);
    let bundle = bundle_certs(judged.contents.bundle.as_bytes()).unwrap();
    assert_eq!(bundle.len(), kept);
    assert_eq!(bundle[0], cert(&current));
    if let Some(first) = earlier.first() {
        assert_eq!(bundle[1], cert(first), "the first earlier CA is the one kept");
    }
    assert!(bundle.iter().all(|c| c.is_ca));
    assert_eq!(judged.contents.previous_until.is_some(), kept == 2);
    let written = Raw::from(&judged.contents);
    assert_eq!(
        judge(&written, &wanted(), now(), None, WRITER).unwrap().changes,
        vec![]
    );
}

/// A CA rotation keeps one earlier CA too: the one this replica serves before the old
/// bundle's.
#[test]
fn a_rotation_keeps_one_earlier_ca_the_served_one_first() {
    let old = mint::authority(now() - 2500 * DAY, 3650 * DAY).unwrap();
    let old_leaf = leaf(&old, &NAMES, now() - DAY, 300 * DAY);
    let mut raw = raw(&old, &old_leaf);
    let older = ca();
    raw.data.insert(CA_BUNDLE.into(), bundle_of(&[&old, &older]));
    let serving = ca();
    let judged = judge(&raw, &wanted(), now(), Some(&cert(&serving)), WRITER).unwrap();
    assert_eq!(judged.changes, vec![Change::Ca(Why::Due)]);
    let bundle = bundle_certs(judged.contents.bundle.as_bytes()).unwrap();
    assert_eq!(bundle, vec![cert(&judged.contents.ca), cert(&serving)]);
}

/// `previous-ca-until` set far ahead keeps the previous CA one overlap past the current CA's
/// making, no longer; read back, the capped time is kept as it is.
#[rstest]
#[case::ten_years(3650 * DAY)]
#[case::an_hour(Duration::from_secs(3600))]
fn the_previous_ca_until_is_capped(#[case] ahead: Duration) {
    let t0 = now();
    let (current, _, mut raw) = good();
    let earlier = ca();
    raw.data
        .insert(CA_BUNDLE.into(), bundle_of(&[&current, &earlier]));
    raw.previous_until = Some(until_text(t0 + ahead));
    let judged = judge(&raw, &wanted(), t0, None, WRITER).unwrap();
    assert_eq!(judged.changes, vec![Change::Bundle]);
    let until = judged.contents.previous_until.unwrap();
    let overlap = wanted().overlap;
    // Made at t0 (not-before an hour earlier, whole seconds): one overlap from then.
    assert!(until <= t0 + overlap, "{until:?}");
    assert!(until <= cert(&current).not_before + Duration::from_secs(3600) + overlap);
    assert!(
        until + Duration::from_secs(2) > t0 + overlap,
        "not cut shorter than the overlap"
    );
    assert_eq!(bundle_certs(judged.contents.bundle.as_bytes()).unwrap().len(), 2);
    let written = Raw::from(&judged.contents);
    assert_eq!(
        judge(&written, &wanted(), t0, None, WRITER).unwrap().changes,
        vec![]
    );
    // Past the cap, whatever was written: the current CA alone.
    let later = judge(
        &written,
        &wanted(),
        t0 + overlap + Duration::from_secs(1),
        None,
        WRITER,
    )
    .unwrap();
    assert_eq!(bundle_certs(later.contents.bundle.as_bytes()).unwrap().len(), 1);
}

/// A value over the bound is not read, however good what it starts with (a PEM reader skips
/// what follows the block): the part it holds is replaced.
#[rstest]
#[case::ca_crt(CA_CRT, Change::Ca(Why::Unreadable))]
#[case::ca_key(CA_KEY, Change::Ca(Why::Unreadable))]
#[case::tls_crt(TLS_CRT, Change::Serving(Why::Unreadable))]
#[case::tls_key(TLS_KEY, Change::Serving(Why::Unreadable))]
#[case::bundle(CA_BUNDLE, Change::Bundle)]
fn an_oversized_value_is_replaced(#[case] key: &str, #[case] change: Change) {
    let (current, _, mut raw) = good();
    raw.data.insert(CA_BUNDLE.into(), bundle_of(&[&current, &ca()]));
    raw.previous_until = Some(until_text(now() + Duration::from_secs(300)));
    let fitting = judge(&raw, &wanted(), now(), None, WRITER).unwrap();
    assert_eq!(
        fitting.changes,
        vec![],
        "the same Secret within the bound is kept"
    );
    let value = raw.data.get_mut(key).unwrap();
    let pad = MAX_VALUE_BYTES + 1 - value.len();
    value.extend(std::iter::repeat_n(b'\n', pad));
    let judged = judge(&raw, &wanted(), now(), None, WRITER).unwrap();
    assert_eq!(judged.changes.first(), Some(&change), "{:?}", judged.changes);
    let bundle = bundle_certs(judged.contents.bundle.as_bytes()).unwrap();
    if key == CA_BUNDLE {
        assert_eq!(
            bundle,
            vec![cert(&current)],
            "nothing of an unread bundle is kept"
        );
    }
    assert!(
        judged
            .contents
            .data()
            .values()
            .all(|v| v.len() <= MAX_VALUE_BYTES)
    );
}

/// Of a Secret another wrote, the only CA kept beside the new one is one every configuration
/// trusts already (an older miggate's, during an upgrade); a CA only the Secret names never is.
#[rstest]
#[case::trusted_everywhere(true, 2)]
#[case::trusted_nowhere(false, 1)]
fn a_foreign_secret_keeps_only_a_ca_already_trusted(#[case] trusted: bool, #[case] in_bundle: usize) {
    let (ca, _, mut raw) = good();
    raw.written_by = None;
    let old = Cert::from_pem(ca.cert_pem.as_bytes()).unwrap();
    let trusting: Vec<Cert> = if trusted { vec![old.clone()] } else { Vec::new() };
    let judged =
        miggate_certs::material::judge_trusting(&raw, &wanted(), now(), None, WRITER, &trusting).unwrap();
    assert_eq!(judged.changes.first(), Some(&Change::Ca(Why::Foreign)));
    let bundle = bundle_certs(judged.contents.bundle.as_bytes()).unwrap();
    assert_eq!(bundle.len(), in_bundle);
    assert_ne!(bundle[0].der, old.der);
    assert_eq!(bundle.iter().any(|c| c.der == old.der), trusted);
    assert_eq!(judged.contents.previous_until.is_some(), trusted);
    assert_eq!(judged.contents.written_by, WRITER);
}

/// A chain of several certificates is served whole, leaf first; the leaf read is the first.
#[test]
fn a_pair_keeps_its_whole_chain() {
    let (ca, leaf, _) = good();
    let chain = format!("{}{}", leaf.cert_pem, ca.cert_pem);
    let pair = ServingPair::from_pem(chain.as_bytes(), leaf.key_pem.as_bytes()).unwrap();
    assert_eq!(pair.chain().len(), 2);
    assert_eq!(pair.chain()[0].as_ref(), cert(&leaf).der.as_slice());
    assert_eq!(pair.chain()[1].as_ref(), cert(&ca).der.as_slice());
    assert_eq!(*pair.leaf(), cert(&leaf));
    let shown = format!("{pair:?}");
    assert!(
        !shown.contains("PRIVATE") && !shown.contains(&leaf.key_pem),
        "{shown}"
    );
}

/// Each way PEM bytes are not a pair, as a typed cause with rustls' or the reader's error
/// behind it.
#[rstest]
#[case::no_certificate(b"".to_vec(), None, "no CERTIFICATE block")]
#[case::garbage_certificate(b"-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n".to_vec(), None, "not a PEM certificate chain")]
#[case::no_key(good().1.cert_pem.into_bytes(), Some(b"".to_vec()), "no usable PEM private key")]
#[case::key_that_cannot_sign(good().1.cert_pem.into_bytes(), Some(b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n".to_vec()), "a private key that cannot sign")]
#[case::key_of_another(good().1.cert_pem.into_bytes(), Some(ca().key_pem.into_bytes()), "the key is not the certificate's")]
fn bytes_that_are_no_pair_say_why(
    #[case] cert_pem: Vec<u8>,
    #[case] key_pem: Option<Vec<u8>>,
    #[case] why: &str,
) {
    let key_pem = key_pem.unwrap_or_else(|| good().1.key_pem.into_bytes());
    let e = ServingPair::from_pem(&cert_pem, &key_pem).unwrap_err();
    assert!(e.to_string().starts_with(why), "{e}");
    let sourced = !matches!(e, PairError::NoCertificate);
    assert_eq!(std::error::Error::source(&e).is_some(), sourced, "{e:?}");
    assert_eq!(
        e.both_read(),
        matches!(e, PairError::Unusable(_) | PairError::Mismatch(_))
    );
}

/// A key of another is a key mismatch, with rustls' words behind it.
#[test]
fn a_key_of_another_is_a_mismatch_with_its_cause() {
    let (_, _, mut raw) = good();
    raw.data.insert(TLS_KEY.into(), ca().key_pem.into_bytes());
    let judged = judge(&raw, &wanted(), now(), None, WRITER).unwrap();
    assert_eq!(judged.changes, vec![Change::Serving(Why::KeyMismatch)]);
    let [Unusable::KeyMismatch { crt, key, source }] = judged.causes.as_slice() else {
        panic!("{:?}", judged.causes)
    };
    assert_eq!((*crt, *key), (TLS_CRT, TLS_KEY));
    assert!(matches!(source, PairError::Mismatch(_)), "{source:?}");
}
