//! Assembling the state document a session serves: terraform's order, a derived serial, the estate's lineage.
//!
//! The document is written straight from the records' own values (no copy of the state as
//! one JSON tree), compact: terraform reads it as JSON and writes its own files itself.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::handle::Session;
use super::snapshot::Snapshot;
use crate::engine::layout::Layout;
use crate::engine::state::{
    Header, Instance, Item, ResourceMeta, compare_versions, instance_order,
};

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
        .filter_map(|e| e.record.writer.terraform_version.as_deref())
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
        let header = header_of(&self.layout, &view.snapshot, fixed);
        view.served = Some((header.lineage.clone(), header.serial));
        document(
            &header,
            view.snapshot.records.values().map(|e| &e.record.item),
        )
    }
}

/// A state v4 document as served: the same content as [`crate::engine::state::assemble`], in
/// terraform's resource order, written from borrowed items.
#[derive(Serialize)]
struct Document<'a> {
    version: u8,
    terraform_version: &'a str,
    serial: u64,
    lineage: &'a str,
    outputs: BTreeMap<&'a str, &'a Value>,
    resources: Vec<Resource<'a>>,
    check_results: Option<()>,
}

#[derive(Serialize)]
struct Resource<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    module: Option<&'a str>,
    mode: &'a str,
    #[serde(rename = "type")]
    type_name: &'a str,
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    each: Option<&'a str>,
    provider: &'a str,
    instances: Vec<&'a Instance>,
}

/// Assemble items into the bytes of a state v4 document (compact JSON, one newline at the end).
pub fn document<'a>(header: &Header, items: impl IntoIterator<Item = &'a Item>) -> Vec<u8> {
    type ResKey<'a> = (&'a str, &'a str, &'a str, &'a str);
    // Sorted, not mapped: items come in record key order, nearly terraform's, so the sort is
    // about one pass, where a map searches its tree for each of thousands of resources.
    let mut instances: Vec<(ResKey<'a>, &'a ResourceMeta, &'a Instance)> = Vec::new();
    let mut outputs = BTreeMap::new();
    for item in items {
        match item {
            Item::Resource { meta, instance, .. } => {
                let key = (
                    meta.module.as_deref().unwrap_or_default(),
                    meta.mode.as_str(),
                    meta.type_name.as_str(),
                    meta.name.as_str(),
                );
                instances.push((key, meta, instance));
            }
            Item::Output { name, output } => {
                outputs.insert(name.as_str(), output);
            }
        }
    }
    let count = instances.len();
    // Stable: a resource's instances keep their order until they are ranked below.
    instances.sort_by(|a, b| a.0.cmp(&b.0));
    let mut resources: Vec<Resource<'a>> = Vec::new();
    let mut last: Option<ResKey<'a>> = None;
    for (key, meta, instance) in instances {
        match resources.last_mut() {
            Some(r) if last == Some(key) => r.instances.push(instance),
            _ => {
                resources.push(Resource {
                    module: meta.module.as_deref(),
                    mode: &meta.mode,
                    type_name: &meta.type_name,
                    name: &meta.name,
                    each: meta.each.as_deref(),
                    provider: &meta.provider,
                    instances: vec![instance],
                });
                last = Some(key);
            }
        }
    }
    for r in &mut resources {
        if r.instances.len() > 1 {
            r.instances.sort_by(|a, b| instance_order(a, b));
        }
    }
    let doc = Document {
        version: 4,
        terraform_version: &header.terraform_version,
        serial: header.serial,
        lineage: &header.lineage,
        outputs,
        resources,
        check_results: None,
    };
    let mut out = Vec::with_capacity(count * 512);
    // Borrowed strings and values with string keys: serialising cannot fail.
    let _ = serde_json::to_writer(&mut out, &doc);
    out.push(b'\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::state;

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
        let ours: Value = serde_json::from_slice(&document(&header, &reversed)).unwrap();
        assert_eq!(ours, state::assemble(&header, &split.items));
    }

    #[test]
    fn instances_kept_as_text_assemble_to_the_same_bytes() {
        use crate::engine::layout::EstateName;
        use crate::engine::program::ProgramStamp;
        use crate::engine::record::{Record, Writer};
        let doc = r#"{"version":4,"terraform_version":"1.11.4","serial":3,"lineage":"l",
          "outputs":{"o":{"value":"x\u00e9\n","type":"string"}},
          "resources":[
            {"mode":"managed","type":"t","name":"c","each":"list","provider":"p",
             "instances":[{"index_key":10,"attributes":{"z":1.50,"a":"q\"\\\u0001 é ${x}"}},{"index_key":2,"deposed":"00aa","attributes":{}},{"index_key":2,"attributes":{"n":[1e400,-0.0,null,true]}}]},
            {"mode":"data","type":"t","name":"d","provider":"p","instances":[{"attributes":{"k":{"b":1,"a":2}}}]}
          ]}"#;
        let layout = Layout::new(EstateName::parse("e").unwrap());
        let split = state::parse(doc.as_bytes()).unwrap();
        let header = Header {
            lineage: "l".into(),
            serial: 9,
            terraform_version: "1.2.3".into(),
        };
        let records: Vec<Record> = split
            .items
            .iter()
            .map(|item| Record {
                estate: "e".into(),
                item: item.clone(),
                program: ProgramStamp::default(),
                writer: Writer {
                    run_id: "r".into(),
                    written_at: "t".into(),
                    terraform_version: None,
                    restored_from: None,
                    log: None,
                },
            })
            .collect();
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
        let parsed = document(&header, records.iter().map(|r| &r.item));
        let text = document(&header, kept.iter().map(|r| &r.item));
        assert_eq!(
            String::from_utf8(text).unwrap(),
            String::from_utf8(parsed).unwrap()
        );
        assert_eq!(kept.iter().rev().cloned().collect::<Vec<_>>(), records);
        let bad = records[0].encode();
        assert!(Record::decode_final(&records[0].key(&layout), &bad, &layout, None).is_err());
    }
}
