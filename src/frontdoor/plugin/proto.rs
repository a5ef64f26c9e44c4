//! Code generated from proto/ (tfplugin6 and go-plugin's own services).
#![allow(missing_docs, clippy::all, clippy::pedantic)]

/// Terraform's plugin protocol 6 (6.10+ for state stores).
pub mod tfplugin6 {
    tonic::include_proto!("tfplugin6");
}

/// go-plugin's controller, stdio and broker services.
pub mod plugin {
    tonic::include_proto!("plugin");
}

/// choudoufu.live.v1: the record-level protocol for the patched tofu.
pub mod live {
    tonic::include_proto!("choudoufu.live.v1");
}
