//! Assembling the state document a session serves: terraform's order, a derived serial, the estate's lineage.
//!
//! The document is written straight from the records' own values (no copy of the state as
//! one JSON tree), compact: terraform reads it as JSON and writes its own files itself.

use std::collections::BTreeMap;

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::handle::Session;
use super::snapshot::{Part, PartInstance, Snapshot};
use crate::engine::layout::Layout;
use crate::engine::state::{Header, InstanceRank, ResourceView, compare_versions};

/// The terraform version an assembled state names when no record says.
pub const FALLBACK_TERRAFORM_VERSION: &str = "1.0.0";

/// The lineage an estate has before any run wrote it: the same for every first run.
pub fn initial_lineage(layout: &Layout) -> String {
    uuid::Uuid::new_v5(
        &uuid::Uuid::NAMESPACE_URL,
        format!("choudoufu-live:estate:{}", layout.estate()).as_bytes(),
    )
    .to_string()
}

/// The serial of a snapshot: a digest of its lineage and every record version, never zero.
pub fn serial_of(lineage: &str, snapshot: &Snapshot) -> u64 {
    let mut h = Sha256::new();
    h.update(lineage.as_bytes());
    for (key, entry) in &snapshot.records {
        h.update([0]);
        h.update(key.as_bytes());
        h.update([0]);
        h.update(entry.version.token.as_bytes());
    }
    let d = h.finalize();
    let mut n = [0u8; 8];
    n.copy_from_slice(&d[..8]);
    (u64::from_be_bytes(n) & ((1 << 52) - 1)) + 1
}

/// The header of a snapshot's document: its lineage and serial (or those given), and terraform version.
pub fn header_of(layout: &Layout, snapshot: &Snapshot, fixed: Option<(String, u64)>) -> Header {
    let lineage = snapshot
        .estate
        .as_ref()
        .map(|(m, _)| m.lineage.clone())
        .unwrap_or_else(|| initial_lineage(layout));
    let terraform_version = snapshot
        .records
        .values()
        .filter_map(|e| e.terraform_version())
        // Most records name the same version: compare only when it differs.
        .fold(None, |min: Option<&str>, v| match min {
            Some(m) if m == v || compare_versions(m, v).is_le() => Some(m),
            _ => Some(v),
        })
        .unwrap_or(FALLBACK_TERRAFORM_VERSION)
        .to_string();
    match fixed {
        Some((lineage, serial)) => Header {
            lineage,
            serial,
            terraform_version,
        },
        None => Header {
            serial: serial_of(&lineage, snapshot),
            lineage,
            terraform_version,
        },
    }
}

impl Session {
    /// The state document of the last read (with a pinned plan's lineage and serial).
    pub async fn state_document(&self) -> Vec<u8> {
        let mut view = self.view.lock().await;
        let fixed = view
            .pin
            .as_ref()
            .map(|pin| (pin.lineage.clone(), pin.serial));
        let (layout, snapshot) = (&self.layout, &view.snapshot);
        let parts = || snapshot.records.values().filter_map(|e| e.part());
        // A large estate's header (a digest of every record's version) is made on a core of
        // its own while the parts are gathered.
        let (header, gathered) = if snapshot.records.len() < SPLIT_INSTANCES {
            (header_of(layout, snapshot, fixed), gather(parts()))
        } else {
            std::thread::scope(|scope| {
                let fixed_there = fixed.clone();
                let header = scope.spawn(move || header_of(layout, snapshot, fixed_there));
                let gathered = gather(parts());
                // Its thread died: it is made here instead.
                let header = header
                    .join()
                    .unwrap_or_else(|_| header_of(layout, snapshot, fixed));
                (header, gathered)
            })
        };
        let text = write_document(&header, gathered);
        view.served = Some((header.lineage, header.serial));
        text
    }
}

impl PartInstance<'_> {
    /// Where it sorts within its resource.
    fn rank(&self) -> InstanceRank {
        match self {
            PartInstance::Instance(i) => i.rank(),
            PartInstance::Text(_, rank) => (*rank).clone(),
        }
    }

    /// Its JSON text, appended to `out`.
    fn write(&self, out: &mut Vec<u8>) {
        match self {
            // A value with string keys: serialising it into memory cannot fail.
            PartInstance::Instance(i) => {
                let _ = serde_json::to_writer(&mut *out, i);
            }
            PartInstance::Text(text, _) => out.extend_from_slice(text),
        }
    }

    /// About how many bytes it takes.
    fn size_hint(&self) -> usize {
        match self {
            PartInstance::Instance(_) => 512,
            PartInstance::Text(text, _) => text.len(),
        }
    }
}

/// `text` as a JSON string, appended to `out`.
fn write_str(out: &mut Vec<u8>, text: &str) {
    // Most texts (a mode, a type, a name) need no escape: copied between quotes, as serde_json
    // writes them, without its writer's per-call setup.
    if text.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.reserve(text.len() + 2);
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
        return;
    }
    // Writing a string into memory cannot fail.
    let _ = serde_json::to_writer(&mut *out, text);
}

/// A resource's place in terraform's order: module, mode, type, name.
fn resource_order(a: &ResourceView<'_>, b: &ResourceView<'_>) -> std::cmp::Ordering {
    fn key<'a>(r: &'a ResourceView<'_>) -> (&'a str, &'a str, &'a str, &'a str) {
        (
            r.module.as_deref().unwrap_or_default(),
            &r.mode,
            &r.type_name,
            &r.name,
        )
    }
    key(a).cmp(&key(b))
}

/// Assemble parts into the bytes of a state v4 document (compact JSON, one newline at the end):
/// the same content as [`crate::engine::state::assemble`], in terraform's resource order,
/// written straight from borrowed parts, each instance kept as text copied as it is.
pub fn document<'a>(header: &Header, parts: impl IntoIterator<Item = Part<'a>>) -> Vec<u8> {
    write_document(header, gather(parts))
}

/// A document's parts, gathered: its resource instances in the order they came, its outputs by name.
struct Gathered<'a> {
    instances: Vec<(ResourceView<'a>, PartInstance<'a>)>,
    outputs: BTreeMap<&'a str, &'a Value>,
}

/// Gather `parts` for [`write_document`].
fn gather<'a>(parts: impl IntoIterator<Item = Part<'a>>) -> Gathered<'a> {
    let parts = parts.into_iter();
    // Gathered in a vector, not a map: a map would search its tree for each of thousands of
    // resources; sized by the parts' bound (a snapshot's records), not grown and copied.
    let mut instances: Vec<(ResourceView<'a>, PartInstance<'a>)> =
        Vec::with_capacity(parts.size_hint().1.unwrap_or(0).min(1 << 20));
    let mut outputs: BTreeMap<&'a str, &'a Value> = BTreeMap::new();
    for part in parts {
        match part {
            Part::Resource { resource, instance } => instances.push((resource, instance)),
            Part::Output { name, output } => {
                outputs.insert(name, output);
            }
        }
    }
    Gathered { instances, outputs }
}

/// The document of `header` and the parts gathered.
fn write_document(header: &Header, gathered: Gathered<'_>) -> Vec<u8> {
    let Gathered {
        mut instances,
        outputs,
    } = gathered;
    let mut out = Vec::with_capacity(text_bound(&instances) + 256);
    out.extend_from_slice(b"{\"version\":4,\"terraform_version\":");
    write_str(&mut out, &header.terraform_version);
    out.extend_from_slice(format!(",\"serial\":{},\"lineage\":", header.serial).as_bytes());
    write_str(&mut out, &header.lineage);
    out.extend_from_slice(b",\"outputs\":");
    // Borrowed values with string keys: serialising them into memory cannot fail.
    let _ = serde_json::to_writer(&mut out, &outputs);
    out.extend_from_slice(b",\"resources\":[");
    // Parts come in record key order, nearly always terraform's: written in one pass over
    // neighbours, sorted (stable: a resource's instances keep their order until they are
    // ranked) only when a pair is out of that order, and written again.
    if !write_resources_split(&mut out, &mut instances) {
        instances.sort_by(|a, b| resource_order(&a.0, &b.0));
        write_resources_split(&mut out, &mut instances);
    }
    out.extend_from_slice(b"],\"check_results\":null}\n");
    out
}

/// About how many bytes `instances` take as resources (each with its resource's fields).
fn text_bound(instances: &[(ResourceView<'_>, PartInstance<'_>)]) -> usize {
    instances.iter().map(|(_, i)| i.size_hint() + 160).sum()
}

/// Instances below which a document is written on one thread.
const SPLIT_INSTANCES: usize = 4096;

/// [`write_resources`], in pieces cut at resource boundaries and written over the machine's
/// cores (at most 8), then joined in order; the same bytes and the same answer.
fn write_resources_split(
    out: &mut Vec<u8>,
    instances: &mut [(ResourceView<'_>, PartInstance<'_>)],
) -> bool {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    if threads < 2 || instances.len() < SPLIT_INSTANCES {
        return write_resources(out, instances);
    }
    // Each cut at the first resource boundary past its share; two neighbours across a cut must
    // be in order, as write_resources checks those within a piece.
    let mut cuts = vec![0];
    for t in 1..threads {
        let mut at = (instances.len() * t / threads).max(cuts[cuts.len() - 1] + 1);
        while at < instances.len() && resource_order(&instances[at - 1].0, &instances[at].0).is_eq()
        {
            at += 1;
        }
        if at >= instances.len() {
            break;
        }
        if resource_order(&instances[at - 1].0, &instances[at].0).is_gt() {
            return false;
        }
        cuts.push(at);
    }
    cuts.push(instances.len());
    let mark = out.len();
    let mut pieces = Vec::with_capacity(cuts.len() - 1);
    let mut rest = &mut *instances;
    for pair in cuts.windows(2) {
        let (piece, tail) = std::mem::take(&mut rest).split_at_mut(pair[1] - pair[0]);
        pieces.push(piece);
        rest = tail;
    }
    let mut pieces = pieces.into_iter();
    let first = pieces.next().unwrap_or_default();
    // None when a piece's thread panicked.
    let joined = std::thread::scope(|scope| {
        let handles: Vec<_> = pieces
            .map(|piece| {
                scope.spawn(move || {
                    let mut text = Vec::with_capacity(text_bound(piece));
                    let ok = write_resources(&mut text, piece);
                    (ok, text)
                })
            })
            .collect();
        let mut ok = write_resources(out, first);
        let mut joined = Some(());
        for handle in handles {
            match handle.join() {
                Ok((true, text)) if ok => {
                    out.push(b',');
                    out.extend_from_slice(&text);
                }
                Ok(_) => ok = false,
                Err(_) => joined = None,
            }
        }
        joined.map(|()| ok)
    });
    match joined {
        Some(true) => true,
        Some(false) => {
            out.truncate(mark);
            false
        }
        // A piece's thread died: the whole is written here instead.
        None => {
            out.truncate(mark);
            write_resources(out, instances)
        }
    }
}

/// Write `instances` to `out` as resources, each with its instances ranked, when they are in
/// terraform's resource order; false, with `out` as it was, when two neighbours are not.
fn write_resources(
    out: &mut Vec<u8>,
    instances: &mut [(ResourceView<'_>, PartInstance<'_>)],
) -> bool {
    let mark = out.len();
    let mut start = 0;
    for end in 1..=instances.len() {
        if let Some(next) = instances.get(end) {
            match resource_order(&instances[end - 1].0, &next.0) {
                std::cmp::Ordering::Equal => continue,
                std::cmp::Ordering::Less => {}
                std::cmp::Ordering::Greater => {
                    out.truncate(mark);
                    return false;
                }
            }
        }
        if start > 0 {
            out.push(b',');
        }
        write_resource(out, &mut instances[start..end]);
        start = end;
    }
    true
}

/// One resource (the view of its first instance) and its instances, ranked, appended to `out`.
fn write_resource(out: &mut Vec<u8>, instances: &mut [(ResourceView<'_>, PartInstance<'_>)]) {
    if instances.len() > 1 {
        instances.sort_by_cached_key(|(_, i)| i.rank());
    }
    let Some((v, _)) = instances.first() else {
        return;
    };
    out.push(b'{');
    if let Some(module) = &v.module {
        out.extend_from_slice(b"\"module\":");
        write_str(out, module);
        out.push(b',');
    }
    out.extend_from_slice(b"\"mode\":");
    write_str(out, &v.mode);
    out.extend_from_slice(b",\"type\":");
    write_str(out, &v.type_name);
    out.extend_from_slice(b",\"name\":");
    write_str(out, &v.name);
    if let Some(each) = &v.each {
        out.extend_from_slice(b",\"each\":");
        write_str(out, each);
    }
    out.extend_from_slice(b",\"provider\":");
    write_str(out, &v.provider);
    out.extend_from_slice(b",\"instances\":[");
    for (j, (_, instance)) in instances.iter().enumerate() {
        if j > 0 {
            out.push(b',');
        }
        instance.write(out);
    }
    out.extend_from_slice(b"]}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::state::{self, Item};

    #[test]
    fn the_document_holds_what_state_assemble_holds() {
        let doc = br#"{"version":4,"terraform_version":"1.11.4","serial":3,"lineage":"l",
          "outputs":{"b":{"value":1,"type":"number"},"a":{"value":"x","type":"string","sensitive":true}},
          "resources":[
            {"module":"module.m[0]","mode":"managed","type":"t","name":"n","each":"map","provider":"p",
             "instances":[{"index_key":"b","attributes":{}},{"index_key":"a","attributes":{"n":1.50}}]},
            {"mode":"data","type":"t","name":"d","provider":"p","instances":[{"attributes":{}}]},
            {"mode":"managed","type":"t","name":"c","each":"list","provider":"p",
             "instances":[{"index_key":1,"attributes":{}},{"index_key":0,"deposed":"00aa","attributes":{}},{"index_key":0,"attributes":{}}]}
          ]}"#;
        let split = state::parse(doc).unwrap();
        let header = Header {
            lineage: "l".into(),
            serial: 9,
            terraform_version: "1.2.3".into(),
        };
        let mut reversed = split.items.clone();
        reversed.reverse();
        let ours: Value =
            serde_json::from_slice(&document(&header, reversed.iter().map(Part::of_item))).unwrap();
        assert_eq!(ours, state::assemble(&header, &split.items));
    }

    #[test]
    fn a_large_document_is_written_in_pieces_as_in_one() {
        // Resources of one to three instances, so cuts fall inside resources and move on.
        let mut resources = Vec::new();
        for r in 0..(SPLIT_INSTANCES + 500) {
            let instances: Vec<String> = (0..(r % 3 + 1))
                .map(|i| format!(r#"{{"index_key":{i},"attributes":{{"n":{r}}}}}"#))
                .collect();
            resources.push(format!(
                r#"{{"mode":"managed","type":"t","name":"n{r:06}","each":"list","provider":"p","instances":[{}]}}"#,
                instances.join(",")
            ));
        }
        let doc = format!(
            r#"{{"version":4,"terraform_version":"1.11.4","serial":3,"lineage":"l","outputs":{{}},"resources":[{}]}}"#,
            resources.join(",")
        );
        let split = state::parse(doc.as_bytes()).unwrap();
        let header = Header {
            lineage: "l".into(),
            serial: 9,
            terraform_version: "1.2.3".into(),
        };
        let gathered = || gather(split.items.iter().map(Part::of_item)).instances;
        let (mut one, mut pieces) = (Vec::new(), Vec::new());
        assert!(write_resources(&mut one, &mut gathered()));
        assert!(write_resources_split(&mut pieces, &mut gathered()));
        assert_eq!(pieces, one);
        // Out of order across a cut, or within a piece: refused, nothing written.
        let mut swapped = gathered();
        let n = swapped.len();
        swapped.swap(n / 2 - 10, n / 2 + 10);
        let mut refused = b"x".to_vec();
        assert!(!write_resources_split(&mut refused, &mut swapped));
        assert_eq!(refused, b"x");
        let mut late = gathered();
        late.swap(n - 40, n - 1);
        assert!(!write_resources_split(&mut refused, &mut late));
        assert_eq!(refused, b"x");
        // In any order given, the document holds what state::assemble does.
        let mut reversed = split.items.clone();
        reversed.reverse();
        let ours: Value =
            serde_json::from_slice(&document(&header, reversed.iter().map(Part::of_item))).unwrap();
        assert_eq!(ours, state::assemble(&header, &split.items));
    }

    #[test]
    fn instances_kept_as_text_assemble_to_the_same_bytes() {
        use crate::engine::record::Record;
        let doc = r#"{"version":4,"terraform_version":"1.11.4","serial":3,"lineage":"l",
          "outputs":{"o":{"value":"x\u00e9\n","type":"string"}},
          "resources":[
            {"mode":"managed","type":"t","name":"c","each":"list","provider":"p",
             "instances":[{"index_key":10,"attributes":{"z":1.50,"a":"q\"\\\u0001 é ${x}"}},{"index_key":2,"deposed":"00aa","attributes":{}},{"index_key":2,"attributes":{"n":[1e400,-0.0,null,true]}}]},
            {"mode":"data","type":"t","name":"d","provider":"p","instances":[{"attributes":{"k":{"b":1,"a":2}}}]}
          ]}"#;
        let (layout, header, records) = records_of(doc, None, None);
        let kept: Vec<Record> = records
            .iter()
            .rev()
            .map(|r| {
                let rank = match &r.item {
                    Item::Resource { instance, .. } => Some(instance.rank()),
                    Item::Output { .. } => None,
                };
                Record::decode_final(&r.key(&layout), &r.encode(), &layout, rank).unwrap()
            })
            .collect();
        let parsed = document(&header, records.iter().map(|r| Part::of_item(&r.item)));
        let text = document(&header, kept.iter().map(|r| Part::of_item(&r.item)));
        assert_eq!(
            String::from_utf8(text).unwrap(),
            String::from_utf8(parsed).unwrap()
        );
        assert_eq!(kept.iter().rev().cloned().collect::<Vec<_>>(), records);
        let bad = records[0].encode();
        assert!(Record::decode_final(&records[0].key(&layout), &bad, &layout, None).is_err());
    }

    /// Estate `e`'s layout, a fixed header, and a record of each item of `doc`, written by run
    /// `r` with terraform `terraform_version` as log entry `log`.
    fn records_of(
        doc: &str,
        terraform_version: Option<&str>,
        log: Option<&str>,
    ) -> (Layout, Header, Vec<crate::engine::record::Record>) {
        use crate::engine::layout::EstateName;
        use crate::engine::program::ProgramStamp;
        let writer = crate::engine::record::Writer {
            run_id: "r".into(),
            written_at: "t".into(),
            terraform_version: terraform_version.map(String::from),
            restored_from: None,
            log: log.map(String::from),
            plan: None,
        };
        let layout = Layout::new(EstateName::parse("e").unwrap());
        let split = state::parse(doc.as_bytes()).unwrap();
        let header = Header {
            lineage: "l".into(),
            serial: 9,
            terraform_version: "1.2.3".into(),
        };
        let records = split
            .items
            .iter()
            .map(|item| crate::engine::record::Record {
                estate: "e".into(),
                item: item.clone(),
                program: ProgramStamp::default(),
                writer: writer.clone(),
            })
            .collect();
        (layout, header, records)
    }

    #[test]
    fn records_an_image_describes_serve_the_same_document_undecoded() {
        use crate::engine::image::{Image, ImageEntry};
        use crate::engine::read::snapshot_of_image;
        use crate::engine::record::Record;
        use crate::store::Version;
        use std::sync::Arc;
        let doc = r#"{"version":4,"terraform_version":"1.11.4","serial":3,"lineage":"l",
          "outputs":{"o":{"value":"x\u00e9\n","type":"string"}},
          "resources":[
            {"module":"module.m[\"k\"]","mode":"managed","type":"t","name":"c","each":"list","provider":"provider[\"registry.terraform.io/hashicorp/t\"]",
             "instances":[{"index_key":10,"attributes":{"z":1.50,"a":"q\"\\\u0001 é ${x}"}},{"index_key":2,"deposed":"00aa","attributes":{}},{"index_key":2,"attributes":{"n":[1e400,-0.0,null,true]}}]},
            {"mode":"data","type":"t","name":"d","provider":"p","instances":[{"attributes":{"k":{"b":1,"a":2}}}]}
          ]}"#;
        let (layout, header, records) = records_of(doc, Some("1.9.0"), Some("log-1"));
        let (keys, bytes, ranks): (Vec<String>, Vec<Vec<u8>>, Vec<_>) = records
            .iter()
            .map(|r| {
                let rank = match &r.item {
                    Item::Resource { instance, .. } => Some(instance.rank()),
                    Item::Output { .. } => None,
                };
                (r.key(&layout), r.encode(), rank)
            })
            .fold((vec![], vec![], vec![]), |mut acc, (k, b, r)| {
                acc.0.push(k.into_string());
                acc.1.push(b);
                acc.2.push(r);
                acc
            });
        let version = Version::new("\"v\"");
        let digests: Vec<String> = records.iter().map(Record::content_digest).collect();
        let entries = (0..records.len()).map(|i| ImageEntry {
            rank: ranks[i].as_ref(),
            key: &keys[i],
            version: &version,
            digest: &digests[i],
            bytes: &bytes[i],
            log: Some("log-1"),
        });
        let image =
            Arc::new(Image::decode(&layout, Image::encode(&layout, "r", None, entries)).unwrap());
        let snapshot = snapshot_of_image(&layout, &image).unwrap();
        let served = document(&header, snapshot.records.values().filter_map(|e| e.part()));
        let parsed = document(&header, records.iter().map(|r| Part::of_item(&r.item)));
        assert_eq!(
            String::from_utf8(served).unwrap(),
            String::from_utf8(parsed).unwrap()
        );
        assert_eq!(
            header_of(&layout, &snapshot, None).terraform_version,
            "1.9.0"
        );
        for r in &records {
            let e = &snapshot.records[r.key(&layout).as_str()];
            assert_eq!(e.address(), r.address());
            assert_eq!(e.log(), Some("log-1"));
            assert_eq!(e.record().unwrap(), r, "decoded when looked into");
            if let Item::Resource { .. } = r.item {
                assert!(
                    e.image_bytes().is_some(),
                    "{} was served undecoded",
                    r.address()
                );
            }
        }
    }
}
