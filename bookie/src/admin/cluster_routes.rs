//! Java 4.18's admin routes that describe the cluster from ZooKeeper rather than this bookie:
//! `GET /api/v1/bookie/list_bookies` and `GET /api/v1/bookie/cluster_info`, with Java's
//! status codes, texts and JSON (Jackson pretty-printed, in the order Java's maps iterate), so
//! that the scripts operators wrote against a Java bookie read ours the same way
//! (docs/research/issue-46-admin-routes.md §4.1, §4.3). They share the autorecovery routes'
//! ZooKeeper session (`autorecovery/routes.rs`), opened when first asked.

use metadata::underreplication::election::current_auditor;
use serde_json::Value;

use crate::admin::jackson;
use crate::autorecovery::routes::{Answer, AutorecoveryRoutes};

/// Answers `method` on `path` when it is one of these routes; `None` otherwise.
pub async fn route(
    zk: &AutorecoveryRoutes,
    method: &str,
    path: &str,
    query: &str,
) -> Option<Answer> {
    Some(match path {
        "/api/v1/bookie/list_bookies" => list_bookies(zk, method, query).await,
        "/api/v1/bookie/cluster_info" => cluster_info(zk, method).await,
        _ => return None,
    })
}

fn text(status: u16, body: &str) -> Answer {
    (status, body.to_string(), false)
}

/// Java's `ListBookiesService`: `{ "<id>" : null, ... }` of the writable bookies, or of the
/// read-only ones with `type=ro`; with `print_hostnames=true` each id maps to its host.
async fn list_bookies(zk: &AutorecoveryRoutes, method: &str, query: &str) -> Answer {
    if method != "GET" {
        return text(404, "Not found method. Should be GET method");
    }
    let mut read_only = false;
    let mut hostnames = false;
    for (k, v) in query.split('&').filter_map(|p| p.split_once('=')) {
        match k {
            "type" => read_only = v == "ro",
            "print_hostnames" => hostnames = v.eq_ignore_ascii_case("true"),
            _ => {}
        }
    }
    let Ok((client, _)) = zk.session().await else {
        return text(500, "Internal Server Error");
    };
    let Ok(list) = metadata::cluster::list_bookies(&client, &zk.cfg).await else {
        return text(500, "Internal Server Error");
    };
    let (ids, parent) = if read_only {
        (list.read_only, zk.cfg.readonly_path())
    } else {
        (list.writable, zk.cfg.available_path())
    };
    // Within a bucket Java's maps keep the order ZooKeeper listed the children in: the order
    // they were created (its own set of children is a HashSet too, and never reorders a bucket).
    let mut created = Vec::with_capacity(ids.len());
    for id in ids {
        let czxid = match client.check_stat(&format!("{parent}/{id}")).await {
            Ok(Some(stat)) => stat.czxid,
            _ => i64::MAX,
        };
        created.push((id, czxid));
    }
    let fields: Vec<(String, Value)> = java_hash_map_order(created)
        .into_iter()
        .map(|id| {
            let host = hostnames.then(|| {
                Value::String(
                    id.rsplit_once(':')
                        .map_or(id.as_str(), |(h, _)| h)
                        .to_string(),
                )
            });
            (id, host.unwrap_or(Value::Null))
        })
        .collect();
    (200, jackson::pretty_object(&fields), true)
}

/// Java's `ClusterInfoService`: its eight fields, in its order. `totalBookiesCount` counts the
/// cookies (every bookie that ever joined), so `unavailableBookiesCount` may be negative, as in
/// Java, when a registered bookie has no cookie.
async fn cluster_info(zk: &AutorecoveryRoutes, method: &str) -> Answer {
    if method != "GET" {
        return text(404, "Only GET is supported.");
    }
    let Ok((client, ur)) = zk.session().await else {
        return text(500, "Internal Server Error");
    };
    let cfg = &zk.cfg;
    let auditor = current_auditor(&client, cfg).await.ok().flatten();
    let (Ok(under), Ok(enabled), Ok(list), Ok(all)) = (
        ur.any().await,
        ur.is_enabled().await,
        metadata::cluster::list_bookies(&client, cfg).await,
        metadata::cluster::list_all_bookies(&client, cfg).await,
    ) else {
        return text(500, "Internal Server Error");
    };
    let total = all.len() as i64;
    let (writable, read_only) = (list.writable.len() as i64, list.read_only.len() as i64);
    let fields = [
        ("auditorElected", Value::Bool(auditor.is_some())),
        ("auditorId", Value::String(auditor.unwrap_or_default())),
        ("clusterUnderReplicated", Value::Bool(under)),
        ("ledgerReplicationEnabled", Value::Bool(enabled)),
        ("totalBookiesCount", total.into()),
        ("writableBookiesCount", writable.into()),
        ("readonlyBookiesCount", read_only.into()),
        (
            "unavailableBookiesCount",
            (total - writable - read_only).into(),
        ),
    ];
    let fields: Vec<(String, Value)> = fields
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    (200, jackson::pretty_object(&fields), true)
}

/// Java's `String.hashCode`: over UTF-16 code units, wrapping.
fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, u| h.wrapping_mul(31).wrapping_add(u as i32))
}

/// The order a `java.util.HashMap` filled with `keys` iterates them: by bucket (the spread
/// hash masked by the table's size: 16, doubled while more than three quarters full), in
/// insertion order within a bucket — here the order of each key's rank (its znode's `czxid`).
pub(crate) fn java_hash_map_order(mut keys: Vec<(String, i64)>) -> Vec<String> {
    let mut capacity = 16usize;
    while keys.len() * 4 > capacity * 3 {
        capacity *= 2;
    }
    let bucket = |k: &str| {
        let h = java_string_hash(k) as u32;
        ((h ^ (h >> 16)) as usize) & (capacity - 1)
    };
    keys.sort_by_key(|(k, rank)| (bucket(k), *rank));
    keys.into_iter().map(|(k, _)| k).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_map_order_is_by_bucket() {
        let keys = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // Ranked in the order given (the order of insertion).
        let ranked = |v: &[&str]| {
            v.iter()
                .enumerate()
                .map(|(i, s)| (s.to_string(), i as i64))
                .collect::<Vec<_>>()
        };
        // Java: a HashMap put "c", "a", "b" iterates a, b, c (buckets 1, 2, 3); "q" (113 =
        // 16 * 7 + 1) shares "a"'s bucket of a 16-slot table, after it or before it as put.
        assert_eq!(
            java_hash_map_order(ranked(&["c", "a", "q", "b"])),
            keys(&["a", "q", "b", "c"])
        );
        assert_eq!(
            java_hash_map_order(ranked(&["c", "q", "a", "b"])),
            keys(&["q", "a", "b", "c"])
        );
        // Seen with a Java bookie (interop A02): 127.0.0.1:12209 and :11060 share bucket 8,
        // and Java lists them in the order their znodes were made.
        for pair in [
            ["127.0.0.1:12209", "127.0.0.1:11060"],
            ["127.0.0.1:11060", "127.0.0.1:12209"],
        ] {
            assert_eq!(java_hash_map_order(ranked(&pair)), keys(&pair));
        }
        // Thirteen keys need 32 slots: "q" (113 & 31 = 17) goes after "a" .. "l" (1..12).
        let order = java_hash_map_order(ranked(&[
            "q", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l",
        ]));
        assert_eq!(order.first().map(String::as_str), Some("a"));
        assert_eq!(order.last().map(String::as_str), Some("q"));
    }

    #[test]
    fn java_string_hashes() {
        // Values of "...".hashCode() in Java.
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("hello"), 99162322);
        // The well-known collision of Java's string hash.
        assert_eq!(java_string_hash("Aa"), 2112);
        assert_eq!(java_string_hash("BB"), 2112);
        // Wrapping past i32::MAX, as Java's int arithmetic does.
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
    }
}
