//! Reading a sample out of the Prometheus text format as a selector does: `name` or
//! `name{a="x",b="y"}`, matching every series of that name whose labels include the given
//! ones, summed (a family that gained a label, such as `registry`, still answers a selector
//! naming the others).

/// The labels of a selector or a series, as `(name, value)` pairs; `None` if unreadable.
fn labels(text: &str) -> Option<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (name, after) = rest.split_once("=\"")?;
        let end = after.find('"')?;
        out.push((
            name.trim_start_matches(',').to_string(),
            after[..end].to_string(),
        ));
        rest = &after[end + 1..];
    }
    Some(out)
}

/// Splits `name{labels}` (or `name`) into the name and its labels.
fn parts(series: &str) -> Option<(&str, Vec<(String, String)>)> {
    match series.split_once('{') {
        None => Some((series, Vec::new())),
        Some((name, rest)) => Some((name, labels(rest.strip_suffix('}')?)?)),
    }
}

/// The sum of every sample of `text` that `selector` matches, `None` when none does.
pub fn sample(text: &str, selector: &str) -> Option<f64> {
    let (want, want_labels) = parts(selector)?;
    let mut total = None;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Some((name, have)) = parts(series) else {
            continue;
        };
        if name != want || !want_labels.iter().all(|l| have.contains(l)) {
            continue;
        }
        if let Ok(v) = value.parse::<f64>() {
            *total.get_or_insert(0.0) += v;
        }
    }
    total
}

#[test]
fn a_selector_matches_every_series_with_its_labels_and_sums_them() {
    let text = "# TYPE a counter\na_total{registry=\"x\",kind=\"npm\",outcome=\"miss\"} 2\n\
                a_total{registry=\"y\",kind=\"npm\",outcome=\"miss\"} 3\n\
                a_total{registry=\"y\",kind=\"npm\",outcome=\"hit\"} 7\nb 1\nb_bucket{le=\"1\"} 9\n";
    assert_eq!(
        sample(text, "a_total{kind=\"npm\",outcome=\"miss\"}"),
        Some(5.0)
    );
    assert_eq!(
        sample(text, "a_total{registry=\"y\",outcome=\"hit\"}"),
        Some(7.0)
    );
    assert_eq!(sample(text, "a_total{outcome=\"gone\"}"), None);
    assert_eq!(sample(text, "b"), Some(1.0));
    assert_eq!(sample(text, "a"), None);
}
