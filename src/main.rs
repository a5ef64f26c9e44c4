//! choudoufu-live: the CLI; the plugin when terraform starts it with no arguments and its cookie;
//! a shim when started as `terraform` or `tofu`.

use choudoufu_live::frontdoor::plugin::{self, handshake};
use choudoufu_live::logging::{self, LogFormat};
use choudoufu_live::telemetry;
use clap::Parser;

/// The program's allocator (Cargo.toml says why).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn runtime() -> tokio::runtime::Runtime {
    match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("Error: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    }
}

fn main() {
    // Called as `terraform` or `tofu` (a `choudoufu-live shim` link): become the real program, or `run` around it.
    if let Some(name) = choudoufu_live::cli::shim::called_as() {
        let e = choudoufu_live::cli::shim::dispatch(name);
        eprintln!("choudoufu-live ({} shim): {e}", name.program());
        std::process::exit(choudoufu_live::cli::EXIT_ERROR);
    }
    if std::env::args_os().len() <= 1 {
        let get = |k: &str| std::env::var(k).ok();
        let env = match handshake::read_env(&get) {
            Ok(env) => env,
            Err(e) => {
                eprintln!("choudoufu-live: {e}");
                std::process::exit(1);
            }
        };
        let rt = runtime();
        let _entered = rt.enter();
        logging::init(LogFormat::Hclog);
        let code = match rt.block_on(plugin::serve(env)) {
            Ok(()) => 0,
            Err(e) => {
                tracing::error!(error = %e, "plugin stopped");
                eprintln!("choudoufu-live: {e}");
                1
            }
        };
        telemetry::shutdown(telemetry::PLUGIN_FLUSH);
        std::process::exit(code);
    }
    let cli = choudoufu_live::cli::Cli::parse();
    let rt = runtime();
    let _entered = rt.enter();
    logging::init(cli.log_format);
    let code = rt.block_on(choudoufu_live::cli::main(cli));
    // The runtime still runs: the exporters' gRPC client sends the last spans and metrics on it.
    telemetry::shutdown(telemetry::EXIT_FLUSH);
    std::process::exit(code);
}
