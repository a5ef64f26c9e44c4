//! Code generated from proto/tfplugin5: the messages of protocol 5 the door reads.
#![allow(missing_docs, clippy::all, clippy::pedantic)]

/// Terraform's plugin protocol 5 (the part the door decodes).
pub mod tfplugin5 {
    tonic::include_proto!("tfplugin5");
}
