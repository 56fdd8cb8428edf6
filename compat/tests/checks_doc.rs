//! docs/checks.md follows the registry: one `### <name>` section per check under "The checks",
//! in report order, and none for a check that does not exist. A new check's row fails this
//! test until its section is written, so the docs cannot forget one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use miggate_compat::CheckName;

const CHECKS_MD: &str = include_str!("../../docs/checks.md");

/// The `### ` headings of the `## The checks` section, in document order.
fn documented_checks(doc: &str) -> Vec<&str> {
    doc.lines()
        .skip_while(|l| *l != "## The checks")
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .filter_map(|l| l.strip_prefix("### "))
        .map(str::trim)
        .collect()
}

#[test]
fn every_check_has_a_section_in_report_order() {
    let registered: Vec<&str> = CheckName::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(
        documented_checks(CHECKS_MD),
        registered,
        "docs/checks.md's `### ` sections under `## The checks` must be the registry's checks, in report order"
    );
}

/// The `--skip` typo's error, shown in full in the policy section, lists every check, as
/// `parse_skip` does; a list cut short with `...` is fine.
#[test]
fn the_documented_skip_error_lists_every_check() {
    let every = CheckName::ALL.map(CheckName::as_str).join(", ");
    let lists: Vec<&str> = CHECKS_MD
        .lines()
        .filter_map(|l| l.split_once("known checks: ").map(|(_, list)| list))
        .collect();
    assert!(!lists.is_empty(), "docs/checks.md shows the --skip typo's error");
    for list in lists {
        assert!(
            list == every || list.ends_with("..."),
            "docs/checks.md lists `{list}`, the registry `{every}`"
        );
    }
}
