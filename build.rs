//! Compile the protos in proto/ with protox (pure Rust: no system protoc) and generate tonic code.

fn main() {
    let protos = [
        "tfplugin6/tfplugin6.proto",
        "tfplugin5/tfplugin5.proto",
        "plugin/grpc_controller.proto",
        "plugin/grpc_stdio.proto",
        "plugin/grpc_broker.proto",
        "choudoufu/live/v1/live.proto",
    ];
    for p in &protos {
        println!("cargo:rerun-if-changed=proto/{p}");
    }
    let fds = match protox::compile(protos, ["proto"]) {
        Ok(fds) => fds,
        Err(e) => panic!("compiling proto/: {e}"),
    };
    if let Err(e) = tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .generate_default_stubs(true)
        .compile_fds(fds)
    {
        panic!("generating code from proto/: {e}");
    }
}
