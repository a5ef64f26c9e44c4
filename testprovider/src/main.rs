//! terraform-provider-cdftest: a tfplugin6 provider of one resource, `cdftest_thing`, for the
//! project's tests. Every call it serves is appended to the call log (`CDFTEST_CALL_LOG`); a thing
//! can be told to sleep inside its apply (`sleep_ms`) or to fail it (`fail`); its objects live as
//! files in `CDFTEST_OBJECTS`, the "cloud" a test can look at.

mod calls;
mod objects;
mod provider;
mod schema;
mod thing;

use std::process::ExitCode;

use choudoufu_live::frontdoor::plugin::proto::tfplugin6::provider_server::ProviderServer;
use choudoufu_live::frontdoor::plugin::{MAX_MESSAGE, handshake, serve_services};

fn main() -> ExitCode {
    let get = |name: &str| std::env::var(name).ok();
    let env = match handshake::read_env(&get) {
        Ok(env) => env,
        Err(e) => {
            eprintln!("terraform-provider-cdftest: {e}");
            return ExitCode::FAILURE;
        }
    };
    let provider = match provider::Cdftest::from_env() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("terraform-provider-cdftest: {e}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("terraform-provider-cdftest: cannot start its runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let service = ProviderServer::new(provider)
        .max_decoding_message_size(MAX_MESSAGE)
        .max_encoding_message_size(MAX_MESSAGE);
    match runtime.block_on(serve_services(env, move |router| {
        router.add_service(service)
    })) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("terraform-provider-cdftest: {e}");
            ExitCode::FAILURE
        }
    }
}
