//! Who may talk to the dashboard: a request must name, in its `Host`, an
//! address the dashboard serves (a loopback name, the bound address, or a
//! name the operator added), else 421 for reads and writes alike — a page
//! on another site reached through DNS rebinding names that site's host.
//! A write must also come from this dashboard's page: no foreign `Origin`,
//! and the form's CSRF token (or the `x-csrf-token` header for the JSON
//! API), a random value only this dashboard's own pages carry.

use std::hash::{BuildHasher, Hasher};
use std::net::IpAddr;

use axum::http::{header, HeaderMap, StatusCode};

/// A refused request: its status and why.
pub(crate) type Refused = (StatusCode, &'static str);

/// The hosts a dashboard answers to, and its CSRF token.
#[derive(Debug)]
pub(crate) struct Guard {
    /// The address bound, when known and not a wildcard.
    bound: Option<IpAddr>,
    /// Names the operator added (lower case).
    hosts: Vec<String>,
    /// The CSRF token (hex).
    pub(crate) token: String,
}

impl Guard {
    pub(crate) fn new(bound: Option<IpAddr>, hosts: &[String]) -> Guard {
        let random = || std::collections::hash_map::RandomState::new().build_hasher().finish();
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        Guard {
            bound: bound.filter(|ip| !ip.is_unspecified()),
            hosts: hosts.iter().map(|h| h.trim_matches(['[', ']']).to_ascii_lowercase()).collect(),
            token: format!("{:016x}{:016x}", random(), h.finish()),
        }
    }

    /// Whether `host` (a `Host` header: a name or address, maybe a port) is
    /// one this dashboard serves.
    pub(crate) fn host_allowed(&self, host: &str) -> bool {
        let name = match host.rsplit_once(':') {
            // `[::1]:8025`, `localhost:8025`; not `::1` alone (no brackets).
            Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) && !name.ends_with(':') => name,
            _ => host,
        };
        let name = name.trim_matches(['[', ']']).to_ascii_lowercase();
        if name == "localhost" || name.ends_with(".localhost") {
            return true;
        }
        if let Ok(ip) = name.parse::<IpAddr>() {
            if ip.is_loopback() || Some(ip) == self.bound {
                return true;
            }
        }
        self.hosts.contains(&name)
    }

    /// Refuses a request whose `Host` this dashboard does not serve.
    pub(crate) fn check_host(&self, headers: &HeaderMap) -> Result<(), Refused> {
        let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("");
        if self.host_allowed(host) {
            return Ok(());
        }
        Err((
            StatusCode::MISDIRECTED_REQUEST,
            "this dashboard answers to loopback names and its own address only (Host refused)",
        ))
    }

    /// Refuses a write from another origin, or without this dashboard's
    /// CSRF token (`token`: the form's field or the API's header).
    pub(crate) fn check_write(&self, headers: &HeaderMap, token: Option<&str>) -> Result<(), Refused> {
        let refuse = |why: &'static str| Err((StatusCode::FORBIDDEN, why));
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("");
            let same =
                origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")) == Some(host);
            if !same {
                return refuse("cross-origin request refused");
            }
        }
        let token = token.or_else(|| headers.get("x-csrf-token").and_then(|v| v.to_str().ok()));
        if token != Some(self.token.as_str()) {
            return refuse("missing or wrong CSRF token: reload the dashboard's page and try again");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names_and_the_bound_address_are_served_others_refused() {
        let g = Guard::new(Some("10.1.2.3".parse().unwrap()), &["jobs.internal".into()]);
        for ok in [
            "localhost:8025",
            "LOCALHOST",
            "127.0.0.1:1",
            "127.9.9.9",
            "[::1]:8025",
            "10.1.2.3:80",
            "jobs.internal:9",
        ] {
            assert!(g.host_allowed(ok), "{ok}");
        }
        for bad in ["attacker.example:8025", "", "10.1.2.4:80", "localhost.attacker.example", "::2"] {
            assert!(!g.host_allowed(bad), "{bad}");
        }
        assert_eq!(g.token.len(), 32);
    }
}
