//! `fetchgate check`: print a decision for people or, with `--json`, for scripts.

use serde_json::{Value, json};

use crate::decide::trust_hint::RefusedDestination;
use crate::decide::{Decision, Host, Policy, RuleId, Verdict};
use crate::redact::redact_locator;

/// The decision as printed: one JSON object on a line of its own, or the text for people.
pub fn render<U>(locator: &str, decision: &Decision<U>, policy: &Policy, json: bool) -> String {
    if json {
        format!("{}\n", to_json(locator, decision, policy))
    } else {
        to_text(locator, decision, policy)
    }
}

/// The decision as one JSON object.
pub(crate) fn to_json<U>(locator: &str, decision: &Decision<U>, policy: &Policy) -> Value {
    let v = &decision.verdict();
    let (kind, host, host_type, port) = match decision.destination() {
        Some((kind, host, port)) => (
            json!(kind),
            json!(host.to_string()),
            json!(host_type(host)),
            json!(port),
        ),
        None => (Value::Null, Value::Null, Value::Null, Value::Null),
    };
    json!({
        "locator": redact_locator(locator),
        "decision": if decision.allowed() { "allowed" } else { "refused" },
        "code": v.reason.code(),
        "reason": v.reason.explanation(),
        "detail": decision.detail(),
        "rule": rule_json(policy, v.rule),
        "via": rule_json(policy, v.via),
        "kind": kind,
        "host": host,
        "host_type": host_type,
        "port": port,
        "addresses": decision.answers().iter().map(|(ip, av)| json!({
            "address": ip.to_string(),
            "decision": if av.allowed() { "allowed" } else { "refused" },
            "code": av.reason.code(),
            "rule": rule_json(policy, av.rule),
            "via": rule_json(policy, av.via),
        })).collect::<Vec<_>>(),
        "next": v.reason.next_action(),
        "trust_rule": trust_rule(decision),
    })
}

/// The `[[egress.trust]]` rule that would allow a refused destination, ready to paste (the
/// one a request's problem carries); `None` when allowed or when no rule can allow it.
fn trust_rule<U>(decision: &Decision<U>) -> Option<String> {
    match decision {
        Decision::Refused(r) => RefusedDestination::of(r).trust_rule(),
        Decision::Allowed(_) => None,
    }
}

/// The decision as text for people.
pub(crate) fn to_text<U>(locator: &str, decision: &Decision<U>, policy: &Policy) -> String {
    let v = &decision.verdict();
    let mut out = format!(
        "{}  {}\n",
        if decision.allowed() {
            "allowed"
        } else {
            "refused"
        },
        redact_locator(locator)
    );
    out.push_str(&format!(
        "  reason   {}: {}\n",
        v.reason.code(),
        v.reason.explanation()
    ));
    if let Some(d) = decision.detail() {
        out.push_str(&format!("  detail   {d}\n"));
    }
    if let Some(line) = rule_line(policy, v) {
        out.push_str(&format!("  rule     {line}\n"));
    }
    let destination = decision.destination();
    if let Some((_, host, port)) = destination {
        out.push_str(&format!(
            "  target   {} {host} port {port}\n",
            host_type(host),
        ));
    }
    if matches!(destination, Some((_, Host::Name(_), _))) && !decision.answers().is_empty() {
        out.push_str("  answers\n");
        for (ip, av) in decision.answers() {
            let verdict = if av.allowed() { "allowed" } else { "refused" };
            let rule = rule_line(policy, av)
                .map(|r| format!("  {r}"))
                .unwrap_or_default();
            out.push_str(&format!(
                "    {ip:<40} {verdict} {}{rule}\n",
                av.reason.code()
            ));
        }
    }
    if !decision.allowed() {
        out.push_str(&format!("  next     {}\n", v.reason.next_action()));
    }
    if let Some(rule) = trust_rule(decision) {
        out.push_str("  if you operate it, this rule allows it:\n");
        for line in rule.lines() {
            out.push_str(&format!("    {line}\n"));
        }
    }
    out
}

fn host_type(host: &Host) -> &'static str {
    match host {
        Host::Name(_) => "name",
        Host::Ip(std::net::IpAddr::V4(_)) => "ipv4",
        Host::Ip(std::net::IpAddr::V6(_)) => "ipv6",
    }
}

fn rule_json(policy: &Policy, id: Option<RuleId>) -> Value {
    match id {
        Some(id) => serde_json::to_value(policy.rule(id)).unwrap_or(Value::Null),
        None => Value::Null,
    }
}

fn rule_line(policy: &Policy, v: &Verdict) -> Option<String> {
    let rule = policy.rule(v.rule?);
    let via = v
        .via
        .map(|id| format!(", via {}", policy.rule(id).name))
        .unwrap_or_default();
    Some(format!("{rule}{via}"))
}
