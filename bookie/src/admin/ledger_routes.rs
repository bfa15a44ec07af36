//! Java 4.18's admin routes that act as a BookKeeper client on the cluster rather than on this
//! bookie's disks: `/api/v1/ledger/{list,metadata,read,delete}`, `/api/v1/bookie/sanity` (a
//! ledger written to this bookie and read back) and `/api/v1/bookie/list_bookie_info` (every
//! bookie's disk space over the wire), with Java's status codes, texts and JSON
//! (docs/research/issue-46-admin-routes.md §3, §4.2, §4.12).
//!
//! Each request runs on a ZooKeeper session and bookie connections of its own, on a thread of
//! its own (`admin_ops::on_cluster`), as Java's services make a client per request; the admin
//! server's runtime only waits for the answer, never longer than [`DEADLINE`].

use std::collections::BTreeMap;
use std::time::Duration;

use autorecovery::digest::{self, EntryHeader};
use autorecovery::entry;
use autorecovery::live::cluster::LiveCluster;
use autorecovery::port::Cluster;
use metadata::ledger_metadata::{
    lifecycle, DigestType, LedgerMetadata, LedgerState, Versioned, WriteOutcome,
};
use net::{Request, Response, StatusCode};
use serde_json::Value;

use crate::admin::cluster_routes::java_hash_map_order;
use crate::admin::jackson::{self, Json};
use crate::autorecovery::admin_ops::on_cluster;
use crate::autorecovery::routes::{Answer, AutorecoveryRoutes};

/// The longest a request waits for its client work.
pub const DEADLINE: Duration = Duration::from_secs(60);
/// Java's `ListLedgerService.LIST_LEDGER_BATCH_SIZE`: ledgers a page.
const LEDGERS_PER_PAGE: i64 = 100;
/// Java's `ReadLedgerEntryService.ENTRIES_PER_PAE`: entries a page.
const ENTRIES_PER_PAGE: i64 = 1000;
/// The most entry bytes one `ledger/read` answer holds (Java: no limit).
const MAX_READ_BYTES: usize = 64 << 20;
/// Entries the sanity check writes (`SanityTestCommand`).
const SANITY_ENTRIES: i64 = 10;

/// What these routes need besides the cluster's metadata settings.
pub struct LedgerRoutes<'a> {
    pub zk: &'a AutorecoveryRoutes,
    /// `forceReadOnlyBookie`: the sanity check does not run, as in Java.
    pub force_read_only: bool,
}

fn text(status: u16, body: impl Into<String>) -> Answer {
    (status, body.into(), false)
}

/// Vert.x's answer to an exception a Java service throws.
fn exception(why: &str) -> Answer {
    log::warn!("admin: {why}");
    text(500, "Internal Server Error")
}

/// `a=1&b` as a map, the last value of a repeated name winning (Java's request params).
fn params(query: &str) -> BTreeMap<String, String> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => (p.to_string(), String::new()),
        })
        .collect()
}

impl LedgerRoutes<'_> {
    /// Answers `method` on `path` when it is one of these routes; `None` otherwise.
    pub async fn route(&self, method: &str, path: &str, query: &str) -> Option<Answer> {
        let p = params(query);
        Some(match path {
            "/api/v1/ledger/list" => self.list(method, &p).await,
            "/api/v1/ledger/metadata" => self.metadata(method, &p).await,
            "/api/v1/ledger/read" => self.read(method, &p).await,
            "/api/v1/ledger/delete" => self.delete(method, &p).await,
            "/api/v1/bookie/sanity" => self.sanity(method).await,
            "/api/v1/bookie/list_bookie_info" => self.list_bookie_info(method).await,
            _ => return None,
        })
    }

    /// Java's `ListLedgerService`: every ledger id in ascending order, `null` or, with
    /// `print_metadata=true`, its metadata (serialized, or decoded with `decode_meta=true`),
    /// then in pages of 100 (the first holds 99: Java counts from one).
    async fn list(&self, method: &str, p: &BTreeMap<String, String>) -> Answer {
        if method != "GET" {
            return text(404, "Not found method. Should be GET method");
        }
        let print = p.get("print_metadata").is_some_and(|v| v == "true");
        let decode = p.get("decode_meta").is_some_and(|v| v == "true");
        let page = match p.get("page").filter(|_| print) {
            Some(v) => match v.parse::<i32>() {
                Ok(n) => i64::from(n),
                Err(_) => return exception(&format!("ledger/list: page {v:?}")),
            },
            None => -1,
        };
        let work = on_cluster(&self.zk.cfg, DEADLINE, move |c: LiveCluster| async move {
            let mut ids = c.ledger_ids().await?;
            ids.sort_unstable();
            let mut fields = Vec::new();
            let (first, last) = if page > 0 {
                let first = (page - 1) * LEDGERS_PER_PAGE;
                (first, first + LEDGERS_PER_PAGE - 1)
            } else {
                (0, 0)
            };
            for (i, id) in ids.into_iter().enumerate() {
                let position = i as i64 + 1;
                if !print {
                    fields.push((id.to_string(), Json::Value(Value::Null)));
                    continue;
                }
                if last != 0 && !(first..=last).contains(&position) {
                    continue;
                }
                let Some(v) = c.read_ledger(id).await? else {
                    return Err(format!("ledger {id} was deleted while listed"));
                };
                let shown = if decode {
                    decoded(id, &v)
                } else {
                    let bytes = v.metadata.encode().map_err(|e| e.to_string())?;
                    Json::Value(Value::String(String::from_utf8_lossy(&bytes).into_owned()))
                };
                fields.push((id.to_string(), shown));
            }
            Ok(fields)
        });
        match work.await {
            Ok(fields) => (200, jackson::pretty_json(&Json::Object(fields)), true),
            Err(e) => exception(&format!("ledger/list: {e}")),
        }
    }

    /// Java's `GetLedgerMetaService`: `{ "<id>" : <LedgerMetadataImpl as Jackson writes it> }`.
    async fn metadata(&self, method: &str, p: &BTreeMap<String, String>) -> Answer {
        let Some(id) = p.get("ledger_id").filter(|_| method == "GET") else {
            return text(404, "Not found method. Should be GET method");
        };
        let Ok(id) = id.parse::<i64>() else {
            return exception(&format!("ledger/metadata: ledger_id {id:?}"));
        };
        let work = on_cluster(&self.zk.cfg, DEADLINE, move |c: LiveCluster| async move {
            c.read_ledger(id as u64)
                .await?
                .ok_or_else(|| format!("ledger {id} does not exist"))
        });
        match work.await {
            Ok(v) => {
                let fields = vec![(id.to_string(), decoded(id as u64, &v))];
                (200, jackson::pretty_json(&Json::Object(fields)), true)
            }
            Err(e) => exception(&format!("ledger/metadata: {e}")),
        }
    }

    /// Java's `ReadLedgerEntryService`: entries `start_entry_id..=end_entry_id` (to the
    /// last-add-confirmed when -1), or a page of 1000, each payload as US-ASCII text.
    async fn read(&self, method: &str, p: &BTreeMap<String, String>) -> Answer {
        let Some(id) = p.get("ledger_id").filter(|_| method == "GET") else {
            return text(
                404,
                "Not found method. Should be GET method, with ledger_id provided",
            );
        };
        let number = |k: &str, default: i64| -> Result<i64, String> {
            p.get(k)
                .map_or(Ok(default), |v| v.parse().map_err(|_| format!("{k} {v:?}")))
        };
        let parsed = (|| {
            let id: i64 = id.parse().map_err(|_| format!("ledger_id {id:?}"))?;
            let page = match p.get("page") {
                Some(v) => i64::from(v.parse::<i32>().map_err(|_| format!("page {v:?}"))?),
                None => -1,
            };
            Ok::<_, String>((
                id,
                number("start_entry_id", 0)?,
                number("end_entry_id", -1)?,
                page,
            ))
        })();
        let (id, mut start, mut end, page) = match parsed {
            Ok(v) => v,
            Err(e) => return exception(&format!("ledger/read: {e}")),
        };
        let mut keyed: Vec<(String, Value)> = Vec::new();
        if page > 0 {
            let (first, last) = ((page - 1) * ENTRIES_PER_PAGE, page * ENTRIES_PER_PAGE - 1);
            if start == 0 || start < first {
                start = first;
            }
            if end == -1 || end > last {
                end = last;
            }
            keyed.push(("Entries for page: ".into(), Value::String(page.to_string())));
        }
        if end != -1 && start > end {
            return text(
                500,
                format!(
                    "parameter for start_entry_id: {start} and end_entry_id: {end} conflict \
                     with page={page}"
                ),
            );
        }
        let work = on_cluster(&self.zk.cfg, DEADLINE, move |c: LiveCluster| async move {
            read_range(&c, id, start, end).await
        });
        match work.await {
            Ok(entries) => {
                for (e, payload) in entries {
                    // Java's new String(bytes, US_ASCII): a byte above 0x7f is U+FFFD.
                    let ascii: String = payload
                        .iter()
                        .map(|&b| if b < 0x80 { b as char } else { '\u{fffd}' })
                        .collect();
                    keyed.push((e.to_string(), Value::String(ascii)));
                }
                // A java.util.HashMap, filled in this order.
                let ranked = keyed
                    .iter()
                    .enumerate()
                    .map(|(i, (k, _))| (k.clone(), i as i64))
                    .collect();
                let mut values: BTreeMap<String, Value> = keyed.into_iter().collect();
                let fields: Vec<(String, Value)> = java_hash_map_order(ranked)
                    .into_iter()
                    .map(|k| {
                        let v = values.remove(&k).unwrap_or(Value::Null);
                        (k, v)
                    })
                    .collect();
                (200, jackson::pretty_object(&fields), true)
            }
            Err(e) => exception(&format!("ledger/read: {e}")),
        }
    }

    /// Java's `DeleteLedgerService`: the ledger's metadata removed (a missing one is success,
    /// as in Java); the bookies reclaim its entries in their garbage collection.
    async fn delete(&self, method: &str, p: &BTreeMap<String, String>) -> Answer {
        if method != "DELETE" {
            return text(404, "Not found method. Should be DELETE method");
        }
        let Some(id) = p.get("ledger_id") else {
            return text(404, "Not ledger found. Should provide ledger_id=<id>");
        };
        let Ok(id) = id.parse::<i64>() else {
            return exception(&format!("ledger/delete: ledger_id {id:?}"));
        };
        let work = on_cluster(&self.zk.cfg, DEADLINE, move |c: LiveCluster| async move {
            lifecycle::delete_ledger(&c.zk, &c.cfg, c.layout(), id as u64)
                .await
                .map_err(|e| e.to_string())
        });
        match work.await {
            Ok(existed) => {
                log::info!("admin: deleted ledger {id} (it existed: {existed})");
                (
                    200,
                    jackson::pretty(&Value::String(format!("Deleted ledger: {id}"))),
                    true,
                )
            }
            Err(e) => exception(&format!("ledger/delete: {e}")),
        }
    }

    /// Java's `BookieSanityService`: a ledger of ten entries written to this bookie alone,
    /// closed, read back and deleted; `passed` says whether all of it worked.
    async fn sanity(&self, method: &str) -> Answer {
        if method != "GET" {
            return text(
                404,
                "Only support GET method to retrieve bookie sanity state.",
            );
        }
        let passed = if self.force_read_only {
            false
        } else {
            let me = self.zk.cfg.bookie_id.clone();
            let work = on_cluster(&self.zk.cfg, DEADLINE, move |c: LiveCluster| async move {
                sanity_check(&c, &me).await
            });
            match work.await {
                Ok(()) => true,
                Err(e) => {
                    log::error!("admin: the sanity check failed: {e}");
                    false
                }
            }
        };
        let fields = [
            ("passed".to_string(), Value::Bool(passed)),
            ("readOnly".to_string(), Value::Bool(self.force_read_only)),
        ];
        (200, jackson::pretty_object(&fields), true)
    }

    /// Java's `ListBookieInfoService`: each bookie's free and total space, as GET_BOOKIE_INFO
    /// gives them, and the sums, as Java's strings.
    async fn list_bookie_info(&self, method: &str) -> Answer {
        if method != "GET" {
            return text(404, "Not found method. Should be GET method");
        }
        let work = on_cluster(&self.zk.cfg, DEADLINE, move |c: LiveCluster| async move {
            let registered = c.registered().await?;
            let mut infos = Vec::new();
            for b in registered
                .writable
                .iter()
                .chain(registered.read_only.iter())
            {
                let asked = Request::GetBookieInfo {
                    requested: Some(
                        net::operation::BOOKIE_INFO_TOTAL_DISK_CAPACITY
                            | net::operation::BOOKIE_INFO_FREE_DISK_SPACE,
                    ),
                };
                match c.call(b, vec![asked]).await.map(|mut r| r.pop()) {
                    Ok(Some(Response::GetBookieInfo {
                        status: StatusCode::EOK,
                        total_disk_capacity,
                        free_disk_space,
                    })) => infos.push((
                        b.clone(),
                        free_disk_space.unwrap_or(0),
                        total_disk_capacity.unwrap_or(0),
                    )),
                    other => log::warn!("admin: bookie info of {b}: {other:?}"),
                }
            }
            Ok(infos)
        });
        let infos = match work.await {
            Ok(i) => i,
            Err(e) => return exception(&format!("list_bookie_info: {e}")),
        };
        if infos.is_empty() {
            return text(404, "Not found any Bookie info.");
        }
        let (free, total) = infos
            .iter()
            .fold((0i64, 0i64), |(f, t), (_, fi, ti)| (f + fi, t + ti));
        // Java iterates the bookies in its map's order (hashed by id).
        let ranked = infos
            .iter()
            .enumerate()
            .map(|(i, (b, _, _))| (b.clone(), i as i64))
            .collect();
        let mut fields: Vec<(String, Value)> = java_hash_map_order(ranked)
            .into_iter()
            .filter_map(|b| infos.iter().find(|(id, _, _)| *id == b))
            .map(|(b, f, t)| {
                let v = format!(": {{Free: {}, Total: {}}},", with_units(*f), with_units(*t));
                (b.clone(), Value::String(v))
            })
            .collect();
        fields.push((
            "ClusterInfo: ".into(),
            Value::String(format!(
                "{{Free: {}, Total: {}}}",
                with_units(free),
                with_units(total)
            )),
        ));
        (200, jackson::pretty_object(&fields), true)
    }
}

/// A ledger's metadata as Jackson writes Java's `LedgerMetadataImpl`: its fields in
/// declaration order, then the properties only its getters give.
fn decoded(id: u64, v: &Versioned) -> Json {
    let md = &v.metadata;
    use base64::Engine;
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let state = match md.state {
        LedgerState::Open => "OPEN",
        LedgerState::InRecovery => "IN_RECOVERY",
        LedgerState::Closed => "CLOSED",
    };
    let has_password = md.password.is_some();
    let digest = match md.digest_type.filter(|_| has_password) {
        Some(DigestType::Crc32) => Value::from("CRC32"),
        Some(DigestType::Hmac) => Value::from("MAC"),
        Some(DigestType::Crc32c) => Value::from("CRC32C"),
        Some(DigestType::Dummy) => Value::from("DUMMY"),
        None => Value::Null,
    };
    let j = |x: Value| Json::Value(x);
    let custom = md
        .custom_metadata
        .iter()
        .map(|(k, val)| (k.clone(), j(Value::String(b64(val)))))
        .collect();
    let ensembles = md
        .ensembles
        .iter()
        .map(|(first, bookies)| {
            let ids = bookies
                .iter()
                .map(|b| Json::Object(vec![("id".into(), j(Value::String(b.clone())))]))
                .collect();
            (first.to_string(), Json::Array(ids))
        })
        .collect();
    let field = |k: &str, j: Json| (k.to_string(), j);
    Json::Object(vec![
        field("ledgerId", j(id.into())),
        field("metadataFormatVersion", j(md.format_version.into())),
        field("ensembleSize", j(md.ensemble_size.into())),
        field("writeQuorumSize", j(md.write_quorum_size.into())),
        field("ackQuorumSize", j(md.ack_quorum_size.into())),
        field("state", j(state.into())),
        field("length", j(md.length.into())),
        field("lastEntryId", j(md.last_entry_id.unwrap_or(-1).into())),
        field("ctime", j(md.ctime.unwrap_or(v.znode_ctime).into())),
        field("digestType", j(digest)),
        field(
            "password",
            j(Value::String(b64(md
                .password
                .as_deref()
                .unwrap_or_default()))),
        ),
        field("customMetadata", Json::Object(custom)),
        field("closed", j(md.is_closed().into())),
        field("allEnsembles", Json::Object(ensembles)),
        field("ctoken", j(md.ctoken.unwrap_or(0).into())),
    ])
}

/// The bookies that store entry `e` (its write set), in the order Java's client tries them.
fn write_set(md: &LedgerMetadata, e: i64) -> Vec<String> {
    let Some((_, ensemble)) = md.ensembles.iter().rev().find(|(first, _)| *first <= e) else {
        return Vec::new();
    };
    let n = ensemble.len();
    if n == 0 || e < 0 {
        return Vec::new(); // metadata no client writes; read as "no bookie to read from"
    }
    (0..md.write_quorum_size.max(0) as usize)
        .map(|i| ensemble[(e as usize + i) % n].clone())
        .collect()
}

/// Java's `readLastConfirmed` without recovery: the last entry id of a closed ledger, else
/// the highest last-add-confirmed the last ensemble's bookies' last entries carry.
async fn last_add_confirmed(c: &LiveCluster, id: u64, md: &LedgerMetadata) -> i64 {
    if md.is_closed() {
        return md.last_entry_id.unwrap_or(-1);
    }
    let mut lac = -1;
    if let Some((_, ensemble)) = md.ensembles.last() {
        for b in ensemble {
            if let Ok(Some(body)) = c.read_last(b, id, None).await {
                lac = lac.max(entry::lac(&body).unwrap_or(-1));
            }
        }
    }
    lac
}

/// Entries `start..=end` (or to the last-add-confirmed when `end` is -1) as Java's
/// `BookKeeperAdmin.readEntries` gives them, one at a time, each from the first bookie of
/// its write set that has it, checked against its digest.
async fn read_range(
    c: &LiveCluster,
    id: i64,
    start: i64,
    end: i64,
) -> Result<Vec<(i64, Vec<u8>)>, String> {
    let v = c
        .read_ledger(id as u64)
        .await?
        .ok_or_else(|| format!("ledger {id} does not exist"))?;
    let md = &v.metadata;
    let lac = last_add_confirmed(c, id as u64, md).await;
    let password = md.password.clone().unwrap_or_default();
    if start < 0 {
        // Java's BKIncorrectParameterException: a 500.
        return Err(format!("ledger {id}: entry {start} does not exist"));
    }
    let mut out = Vec::new();
    let mut held = 0usize;
    let mut e = start;
    while (end == -1 || e <= end) && e <= lac {
        // Java holds every entry asked for in one answer; we hold at most this much.
        if held > MAX_READ_BYTES {
            return Err(format!(
                "ledger {id}: entries {start}..{e} already hold {held} bytes, more than \
                 {MAX_READ_BYTES}: ask for fewer (end_entry_id, page)"
            ));
        }
        let mut last_error = String::from("no bookie to read from");
        let mut payload = None;
        let mut absent = 0;
        let bookies = write_set(md, e);
        for b in &bookies {
            match c.read_entries(b, id as u64, &[e]).await.pop() {
                Some(Ok(body)) => {
                    let p = digest::verify(&body, md.digest_type, &password, id, e)?;
                    payload = Some(p.to_vec());
                    break;
                }
                Some(Err(err)) => {
                    if err.is_absent() {
                        absent += 1;
                    }
                    last_error = format!("entry {id}:{e} from {b}: {err:?}");
                }
                None => {}
            }
        }
        match payload {
            Some(p) => {
                held += p.len();
                out.push((e, p))
            }
            // Java stops quietly at a missing entry when no end was given.
            None if end == -1 && absent == bookies.len() && absent > 0 => break,
            None => return Err(last_error),
        }
        e += 1;
    }
    Ok(out)
}

/// Java's `SanityTestCommand` with `LocalBookieEnsemblePlacementPolicy`: a ledger of ensemble
/// one on this bookie (it must be writable), digest MAC, empty password; ten entries
/// `entry-0` .. `entry-9`; closed; read back and compared; deleted.
async fn sanity_check(c: &LiveCluster, me: &str) -> Result<(), String> {
    if !c.registered().await?.writable.contains(me) {
        return Err(format!("{me} is not a writable bookie"));
    }
    let id = lifecycle::allocate_ledger_id(&c.zk, &c.cfg)
        .await
        .map_err(|e| e.to_string())?;
    let now = c.now_ms();
    let mut md = LedgerMetadata {
        format_version: 3,
        ensemble_size: 1,
        write_quorum_size: 1,
        ack_quorum_size: 1,
        state: LedgerState::Open,
        last_entry_id: None,
        length: 0,
        ensembles: vec![(0, vec![me.to_string()])],
        digest_type: Some(DigestType::Hmac),
        password: Some(Vec::new()),
        ctime: Some(now),
        custom_metadata: Vec::new(),
        ctoken: Some(0),
    };
    let version = lifecycle::create_ledger(&c.zk, &c.cfg, c.layout(), id, &md)
        .await
        .map_err(|e| e.to_string())?;
    let result = write_and_read_back(c, me, id, &mut md, version).await;
    let deleted = lifecycle::delete_ledger(&c.zk, &c.cfg, c.layout(), id).await;
    result?;
    deleted.map(|_| ()).map_err(|e| e.to_string())
}

async fn write_and_read_back(
    c: &LiveCluster,
    me: &str,
    id: u64,
    md: &mut LedgerMetadata,
    version: i32,
) -> Result<(), String> {
    let key = entry::master_key(b"");
    let mut length = 0i64;
    let mut adds = Vec::new();
    for e in 0..SANITY_ENTRIES {
        let payload = format!("entry-{e}");
        length += payload.len() as i64;
        let h = EntryHeader {
            ledger_id: id as i64,
            entry_id: e,
            last_add_confirmed: e - 1,
            length,
        };
        adds.push(Request::AddEntry {
            ledger_id: id as i64,
            entry_id: e,
            master_key: bytes::Bytes::copy_from_slice(&key),
            body: digest::package(&h, md.digest_type, b"", payload.as_bytes()),
            recovery: false,
            write_flags: None,
        });
    }
    for (e, r) in c.call(me, adds).await?.into_iter().enumerate() {
        match r {
            Response::AddEntry {
                status: StatusCode::EOK,
                ..
            } => {}
            other => return Err(format!("add {id}:{e} to {me}: {other:?}")),
        }
    }
    md.state = LedgerState::Closed;
    md.last_entry_id = Some(SANITY_ENTRIES - 1);
    md.length = length;
    match metadata::ledger_metadata::write_versioned(&c.zk, &c.cfg, c.layout(), id, md, version)
        .await
        .map_err(|e| e.to_string())?
    {
        WriteOutcome::Written(_) => {}
        other => return Err(format!("closing ledger {id}: {other:?}")),
    }
    let read = read_range(c, id as i64, 0, -1).await?;
    if read.len() as i64 != SANITY_ENTRIES {
        return Err(format!(
            "ledger {id}: read back {} entries of {SANITY_ENTRIES}",
            read.len()
        ));
    }
    for (e, payload) in read {
        if payload != format!("entry-{e}").as_bytes() {
            return Err(format!("ledger {id}: entry {e} came back different"));
        }
    }
    Ok(())
}

/// Java's `ListBookieInfoService.getReadable`: the value, then when it is 1000 or more its
/// size in KB, MB, GB or TB (powers of 1000) to three decimals rounded down, trailing zeros
/// dropped: `999`, `1000(1KB)`, `53687091200(53.687GB)`.
fn with_units(v: i64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    // Integers in thousandths rather than Java's double: the same digits, rounded down,
    // without binary fractions.
    let (mut unit, mut div) = (0usize, 1i128);
    while i128::from(v) / div >= 1000 && unit < UNITS.len() {
        div *= 1000;
        unit += 1;
    }
    if unit == 0 {
        return v.to_string();
    }
    let thousandths = i128::from(v) * 1000 / div;
    let mut n = (thousandths / 1000).to_string();
    let frac = thousandths % 1000;
    if frac != 0 {
        n.push('.');
        n.push_str(format!("{frac:03}").trim_end_matches('0'));
    }
    format!("{v}({n}{})", UNITS[unit - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readable_sizes_as_java_prints_them() {
        assert_eq!(with_units(0), "0");
        assert_eq!(with_units(999), "999");
        assert_eq!(with_units(1000), "1000(1KB)");
        assert_eq!(with_units(1999), "1999(1.999KB)");
        assert_eq!(with_units(999_999), "999999(999.999KB)");
        assert_eq!(with_units(1_000_000), "1000000(1MB)");
        assert_eq!(with_units(53_687_091_200), "53687091200(53.687GB)");
        assert_eq!(with_units(107_374_182_400), "107374182400(107.374GB)");
        assert_eq!(
            with_units(5_000_000_000_000_000),
            "5000000000000000(5000TB)"
        );
    }

    #[test]
    fn write_sets_rotate_over_the_ensemble_in_force() {
        let md = LedgerMetadata {
            format_version: 3,
            ensemble_size: 3,
            write_quorum_size: 2,
            ack_quorum_size: 2,
            state: LedgerState::Open,
            last_entry_id: None,
            length: 0,
            ensembles: vec![
                (0, vec!["a".into(), "b".into(), "c".into()]),
                (10, vec!["a".into(), "d".into(), "c".into()]),
            ],
            digest_type: Some(DigestType::Crc32c),
            password: Some(b"p".to_vec()),
            ctime: None,
            custom_metadata: Vec::new(),
            ctoken: None,
        };
        assert_eq!(write_set(&md, 0), ["a", "b"]);
        assert_eq!(write_set(&md, 2), ["c", "a"]);
        assert_eq!(write_set(&md, 10), ["d", "c"]);
        // A negative entry, or an empty ensemble in metadata somebody wrote: nobody to ask.
        assert!(write_set(&md, -1).is_empty());
        let empty = LedgerMetadata {
            ensembles: vec![(0, Vec::new())],
            ..md
        };
        assert!(write_set(&empty, 0).is_empty());
    }
}
