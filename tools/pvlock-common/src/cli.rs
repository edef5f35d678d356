// SPDX-License-Identifier: GPL-2.0

//! Command-line pieces of the tools: `SECS` options, the exit status of
//! `main()` and the checks of a command line's help.

use std::io;
use std::process::ExitCode;
use std::sync::OnceLock;

use clap::{CommandFactory, Parser};

/// The program's name, once [`parse`] has read the command line.
static PROGRAM: OnceLock<String> = OnceLock::new();

/// The name of the running tool, for messages that say what it needs.
pub fn program() -> &'static str {
    PROGRAM.get().map_or("this program", String::as_str)
}

/// Parses the command line of `C`. `--help` and `--version` print and
/// succeed; every other error prints and exits 1 (clap's own exit status
/// for a bad command line is 2).
pub fn parse<C: Parser>() -> Result<C, ExitCode> {
    let _ = PROGRAM.set(C::command().get_name().to_owned());
    C::try_parse().map_err(|e| {
        let _ = e.print();
        if e.use_stderr() {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        }
    })
}

/// The exit status of `main()`: the run's own, or 1 after printing the
/// error with its causes as `<prefix>: <error>`.
pub fn exit_status(prefix: &str, run: anyhow::Result<ExitCode>) -> ExitCode {
    match run {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{prefix}: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Whether `e` comes from writing to a closed pipe (`tool | head`).
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    })
}

/// A positive number of seconds, at most a day: the `SECS` of an option.
pub fn parse_secs(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !(v.is_finite() && v > 0.0 && v <= 86400.0) {
        return Err(format!("{s}: seconds must be above 0 and at most 86400"));
    }
    Ok(v)
}

/// Panics unless every option of `C` has an example in its long help, as
/// `Example: <name> ...`.
pub fn assert_every_option_has_an_example<C: CommandFactory>() {
    let cmd = C::command();
    let example = format!("Example: {}", cmd.get_name());
    for arg in cmd.get_arguments() {
        let id = arg.get_id().as_str();
        if id == "help" || id == "version" {
            continue;
        }
        let help = arg
            .get_long_help()
            .map(|h| h.to_string())
            .unwrap_or_default();
        assert!(help.contains(&example), "--{id} has no example");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_must_be_positive() {
        assert_eq!(parse_secs("0.25"), Ok(0.25));
        assert!(parse_secs("0").is_err());
        assert!(parse_secs("-1").is_err());
        assert!(parse_secs("nan").is_err());
        assert!(parse_secs("inf").is_err());
        assert!(parse_secs("x").is_err());
        assert_eq!(parse_secs("86400"), Ok(86400.0));
        assert!(parse_secs("86401").is_err());
    }

    #[test]
    fn broken_pipes_are_found_in_the_chain() {
        let e = anyhow::Error::from(io::Error::from(io::ErrorKind::BrokenPipe)).context("writing");
        assert!(is_broken_pipe(&e));
        assert!(!is_broken_pipe(&anyhow::anyhow!("other")));
    }
}
