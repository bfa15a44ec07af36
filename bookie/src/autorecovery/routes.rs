//! `/api/v1/autorecovery/*`: Java 4.18's seven autorecovery routes, with its methods, status
//! codes and answers (most are plain text; JSON as Jackson prints it). None needs autorecovery
//! to run in this bookie: they read and write the under-replication manager's znodes in
//! ZooKeeper, on a session the admin server opens when first asked. `bookie` and
//! `decommission` start their work and answer at once, as Java does.

use std::collections::BTreeMap;

use metadata::underreplication::election::{current_auditor, election_exists, election_no_node};
use metadata::underreplication::manager::{ToggleError, UrManager};
use metadata::zookeeper::Client;
use metadata::MetadataConfig;

use super::admin_ops;
use crate::admin::jackson;

/// What the routes need: the cluster's metadata settings and a session made on demand.
pub struct AutorecoveryRoutes {
    pub cfg: MetadataConfig,
    pub settings: autorecovery::settings::Settings,
    zk: tokio::sync::Mutex<Option<Client>>,
}

/// An answer: status, body, and whether the body is JSON.
pub type Answer = (u16, String, bool);

fn text(status: u16, body: impl Into<String>) -> Answer {
    (status, body.into(), false)
}

fn json(status: u16, body: String) -> Answer {
    (status, body, true)
}

impl AutorecoveryRoutes {
    pub fn new(
        cfg: MetadataConfig,
        settings: autorecovery::settings::Settings,
    ) -> AutorecoveryRoutes {
        AutorecoveryRoutes {
            cfg,
            settings,
            zk: tokio::sync::Mutex::new(None),
        }
    }

    /// The admin server's session (made again if the last one failed).
    pub(crate) async fn session(&self) -> Result<(Client, UrManager), String> {
        let mut guard = self.zk.lock().await;
        if let Some(c) = guard.as_ref() {
            if let Ok(m) = UrManager::open(c.clone(), &self.cfg, "").await {
                return Ok((c.clone(), m));
            }
        }
        let c = metadata::zk::connect(&self.cfg)
            .await
            .map_err(|e| e.to_string())?;
        let m = UrManager::open(c.clone(), &self.cfg, "")
            .await
            .map_err(|e| e.to_string())?;
        *guard = Some(c.clone());
        Ok((c, m))
    }

    /// Answers `method` on `/api/v1/autorecovery/<sub>`; `None`: not one of these routes.
    pub async fn route(&self, method: &str, sub: &str, query: &str, body: &[u8]) -> Option<Answer> {
        let params = parse_query(query);
        let body = (!body.is_empty()).then(|| String::from_utf8_lossy(body).into_owned());
        Some(match sub {
            "status" => self.status(method, &params).await,
            "bookie" => self.recover_bookie(method, body.as_deref()),
            "list_under_replicated_ledger" => self.list_ur(method, &params).await,
            "who_is_auditor" => self.who_is_auditor(method).await,
            "trigger_audit" => self.trigger_audit(method).await,
            "lost_bookie_recovery_delay" => self.delay(method, body.as_deref()).await,
            "decommission" => self.decommission(method, body.as_deref()),
            _ => return None,
        })
    }

    async fn status(&self, method: &str, params: &BTreeMap<String, String>) -> Answer {
        if method != "GET" && method != "PUT" {
            return text(404, "Not found method. Should be GET or PUT method");
        }
        let (_, m) = match self.session().await {
            Ok(s) => s,
            Err(e) => return text(500, e),
        };
        if method == "PUT" {
            let Some(v) = params.get("enabled") else {
                return text(
                    400,
                    format!("Param 'enabled' not found in {}", java_map(params)),
                );
            };
            // Java's Boolean.parseBoolean: "true" in any case enables; anything else disables.
            let r = if v.eq_ignore_ascii_case("true") {
                m.enable().await
            } else {
                m.disable().await
            };
            if let Err(ToggleError::Failed(e)) = r {
                return text(500, e.to_string());
            }
        }
        match m.is_enabled().await {
            Ok(enabled) => json(
                200,
                jackson::pretty(&serde_json::json!({ "enabled": enabled })),
            ),
            Err(e) => text(500, e.to_string()),
        }
    }

    /// Java's `RecoveryBookieService`: the body is read (strictly, into `bookie_src` and
    /// `delete_cookie`) before the method is looked at.
    fn recover_bookie(&self, method: &str, body: Option<&str>) -> Answer {
        let Some(body) = body else {
            return text(404, "No request body provide.");
        };
        let bad = || {
            text(
                404,
                "ERROR parameters: Failed to deserialize Object from Json string",
            )
        };
        let Ok(serde_json::Value::Object(v)) = serde_json::from_str::<serde_json::Value>(body)
        else {
            return bad();
        };
        if v.keys().any(|k| k != "bookie_src" && k != "delete_cookie") {
            return bad();
        }
        let sources = match v.get("bookie_src") {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::Array(a)) if a.iter().all(|b| b.is_string()) => Some(a),
            Some(_) => return bad(),
        };
        if method != "PUT" {
            return text(404, "Not found method. Should be PUT method");
        }
        // Java dereferences a missing list.
        let Some(sources) = sources else {
            return text(500, "Internal Server Error");
        };
        let Some(src) = sources.first().and_then(|b| b.as_str()) else {
            return text(404, "Not found method. Should be PUT method");
        };
        admin_ops::recover_bookie_data(self.cfg.clone(), self.settings.clone(), src.to_string());
        text(200, "Success send recovery request command.")
    }

    async fn list_ur(&self, method: &str, params: &BTreeMap<String, String>) -> Answer {
        if method != "GET" {
            return text(404, "Not found method. Should be GET method");
        }
        let (_, m) = match self.session().await {
            Ok(s) => s,
            Err(e) => return text(404, format!("Exception when get.{e}")),
        };
        let list = match m.list().await {
            Ok(l) => l,
            Err(e) => return text(404, format!("Exception when get.{e}")),
        };
        let want = params.get("missingreplica");
        let not = params.get("excludingmissingreplica");
        let chosen: Vec<_> = list
            .into_iter()
            .filter(|(_, r)| want.is_none_or(|w| r.replicas.contains(w)))
            .filter(|(_, r)| not.is_none_or(|n| !r.replicas.contains(n)))
            .collect();
        if chosen.is_empty() {
            return text(404, "No under replicated ledgers found");
        }
        if params.contains_key("printmissingreplica") {
            let fields: Vec<(String, serde_json::Value)> = chosen
                .iter()
                .map(|(id, r)| (id.to_string(), serde_json::json!(r.replicas)))
                .collect();
            json(200, jackson::pretty_object(&fields))
        } else {
            let ids: Vec<u64> = chosen.iter().map(|(id, _)| *id).collect();
            json(200, jackson::pretty(&serde_json::json!(ids)))
        }
    }

    async fn who_is_auditor(&self, method: &str) -> Answer {
        if method != "GET" {
            return text(404, "Not found method. Should be GET method");
        }
        let (c, _) = match self.session().await {
            Ok(s) => s,
            Err(e) => return text(404, format!("Exception when get.{e}")),
        };
        if let Ok(false) = election_exists(&c, &self.cfg).await {
            return text(
                404,
                format!("Exception when get.{}", election_no_node(&self.cfg)),
            );
        }
        match current_auditor(&c, &self.cfg).await {
            Ok(Some(id)) => text(200, format!("Auditor: {id}")),
            Ok(None) => text(404, "No auditor elected"),
            Err(e) => text(404, format!("Exception when get.{e}")),
        }
    }

    async fn trigger_audit(&self, method: &str) -> Answer {
        if method != "PUT" {
            return text(404, "Not found method. Should be PUT method");
        }
        let fail = |m: &str| text(404, format!("Exception when do operation.{m}"));
        let (c, m) = match self.session().await {
            Ok(s) => s,
            Err(e) => return fail(&e),
        };
        match m.is_enabled().await {
            Ok(true) => {}
            Ok(false) => return fail("Autorecovery is disabled. So giving up!"),
            Err(e) => return fail(&e.to_string()),
        }
        if let Ok(false) = election_exists(&c, &self.cfg).await {
            return fail(
                "Autorecovery is disabled due to missing Zookeeper node. Aborting recovery!",
            );
        }
        match current_auditor(&c, &self.cfg).await {
            Ok(Some(_)) => {}
            Ok(None) => {
                return fail("No auditor elected, though Autorecovery is enabled. So giving up.")
            }
            Err(e) => return fail(&e.to_string()),
        }
        let delay = match m.lost_bookie_recovery_delay().await {
            Ok(d) => d.unwrap_or(0),
            Err(e) => return fail(&e.to_string()),
        };
        match m.set_lost_bookie_recovery_delay(delay).await {
            Ok(()) => text(200, "Success trigger audit."),
            Err(e) => fail(&e.to_string()),
        }
    }

    async fn delay(&self, method: &str, body: Option<&str>) -> Answer {
        match method {
            "GET" => {
                let fail = |e: String| {
                    text(
                        404,
                        format!("Exception when get lostBookieRecoveryDelay.{e}"),
                    )
                };
                let (_, m) = match self.session().await {
                    Ok(s) => s,
                    Err(e) => return fail(e),
                };
                match m.lost_bookie_recovery_delay().await {
                    Ok(Some(d)) => text(200, format!("lostBookieRecoveryDelay value: {d}")),
                    // Java's ReplicationException for ZooKeeper's NoNode.
                    Ok(None) => fail("Error contacting zookeeper".into()),
                    Err(e) => fail(e.to_string()),
                }
            }
            "PUT" => {
                let Some(body) = body else {
                    return text(404, "Null request body for lostBookieRecoveryDelay.");
                };
                let Ok(v) = serde_json::from_str::<serde_json::Value>(body) else {
                    return text(500, "Internal Server Error");
                };
                let Some(d) = v.get("delay_seconds") else {
                    return text(404, "Request body not contains lostBookieRecoveryDelay.");
                };
                let Some(d) = d.as_i64().and_then(|d| i32::try_from(d).ok()) else {
                    return text(500, "Internal Server Error");
                };
                let (_, m) = match self.session().await {
                    Ok(s) => s,
                    Err(e) => return text(500, e),
                };
                match m.set_lost_bookie_recovery_delay(d).await {
                    Ok(()) => text(200, format!("Success set lostBookieRecoveryDelay to {d}")),
                    Err(e) => text(
                        404,
                        format!("Exception when set lostBookieRecoveryDelay.{e}"),
                    ),
                }
            }
            _ => text(404, "Not found method. Should be PUT method"),
        }
    }

    fn decommission(&self, method: &str, body: Option<&str>) -> Answer {
        if method != "PUT" {
            return text(404, "Not found method. Should be PUT method");
        }
        let Some(body) = body else {
            return text(404, "Null request body for DecommissionService.");
        };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(body) else {
            return text(500, "Internal Server Error");
        };
        let Some(src) = v.get("bookie_src").and_then(|s| s.as_str()) else {
            return text(404, "Request body not contains bookie_src.");
        };
        if metadata::config::validate_bookie_id(src).is_err() {
            return text(
                404,
                format!("Exception when send decommission command.Invalid bookie id {src}"),
            );
        }
        let delete_cookie = v
            .get("delete_cookie")
            .map(|d| match d {
                serde_json::Value::String(s) => s.eq_ignore_ascii_case("true"),
                serde_json::Value::Bool(b) => *b,
                _ => false,
            })
            .unwrap_or(false);
        admin_ops::decommission(self.cfg.clone(), src.to_string(), delete_cookie);
        text(
            200,
            format!("Success send decommission Bookie command {src}"),
        )
    }
}

/// `a=1&b` as a map (a name without `=` has an empty value).
fn parse_query(q: &str) -> BTreeMap<String, String> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => (p.to_string(), String::new()),
        })
        .collect()
}

/// A map as Java's `HashMap.toString` prints it (`{a=1, b=2}`).
fn java_map(m: &BTreeMap<String, String>) -> String {
    let inner: Vec<String> = m.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{{{}}}", inner.join(", "))
}
