//! choudoufu-live: the CLI, or the plugin when terraform starts it with no arguments and its cookie.

use choudoufu_live::logging::{self, LogFormat};
use choudoufu_live::plugin::{self, handshake};
use clap::Parser;

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
    if std::env::args_os().len() <= 1 {
        let get = |k: &str| std::env::var(k).ok();
        let env = match handshake::read_env(&get) {
            Ok(env) => env,
            Err(e) => {
                eprintln!("choudoufu-live: {e}");
                std::process::exit(1);
            }
        };
        logging::init(LogFormat::Hclog);
        let code = match runtime().block_on(plugin::serve(env)) {
            Ok(()) => 0,
            Err(e) => {
                tracing::error!(error = %e, "plugin stopped");
                eprintln!("choudoufu-live: {e}");
                1
            }
        };
        std::process::exit(code);
    }
    let cli = choudoufu_live::cli::Cli::parse();
    logging::init(cli.log_format);
    let code = runtime().block_on(choudoufu_live::cli::main(cli));
    std::process::exit(code);
}
