// SPDX-License-Identifier: GPL-2.0

//! A kernel module's parameters (`/sys/module/<module>/parameters/`).

use std::fs;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};

/// The parameter directory of a module.
#[derive(Debug, Clone)]
pub struct Params {
    pub dir: PathBuf,
}

impl Params {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Params { dir: dir.into() }
    }

    /// The parameters of `module`: `/sys/module/<module>/parameters`.
    pub fn of_module(module: &str) -> Self {
        Params::new(format!("/sys/module/{module}/parameters"))
    }

    /// Whether the module is loaded: its parameter directory exists.
    pub fn module_loaded(&self) -> bool {
        self.dir.is_dir()
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// A parameter as text, or `None` if the module is not loaded.
    pub fn read(&self, name: &str) -> Result<Option<String>> {
        let path = self.path(name);
        if !self.module_loaded() {
            return Ok(None);
        }
        let s =
            fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
        Ok(Some(s.trim().to_string()))
    }

    /// A boolean parameter, or `None` if the module is not loaded.
    pub fn read_bool(&self, name: &str) -> Result<Option<bool>> {
        match self.read(name)? {
            None => Ok(None),
            Some(s) => parse_bool(&s)
                .map(Some)
                .with_context(|| format!("{}", self.path(name).display())),
        }
    }

    /// Sets a boolean parameter.
    pub fn write_bool(&self, name: &str, value: bool) -> Result<()> {
        self.write(name, if value { "Y" } else { "N" })
    }

    /// Sets a parameter to `value`, as text.
    pub fn write(&self, name: &str, value: &str) -> Result<()> {
        let path = self.path(name);
        fs::write(&path, value).with_context(|| format!("cannot write {} (root?)", path.display()))
    }

    /// The parameters `names` that can be read, as `name=value`, for a log.
    pub fn describe(&self, names: &[&str]) -> String {
        let mut out = Vec::new();
        for name in names {
            if let Ok(Some(v)) = self.read(name) {
                out.push(format!("{name}={v}"));
            }
        }
        out.join(" ")
    }
}

/// A kernel boolean parameter: Y/N (also y/n/1/0).
pub fn parse_bool(s: &str) -> Result<bool> {
    match s.trim() {
        "Y" | "y" | "1" => Ok(true),
        "N" | "n" | "0" => Ok(false),
        other => bail!("not a boolean parameter value: {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_booleans() {
        assert!(parse_bool("Y\n").unwrap());
        assert!(!parse_bool("N").unwrap());
        assert!(parse_bool("maybe").is_err());
    }

    #[test]
    fn a_module_not_loaded_has_no_values() {
        assert_eq!(
            Params::of_module("host_kvm").dir,
            PathBuf::from("/sys/module/host_kvm/parameters")
        );
        let p = Params::new("/nonexistent/host_kvm/parameters");
        assert!(!p.module_loaded());
        assert_eq!(p.read("force").unwrap(), None);
        assert_eq!(p.read_bool("force").unwrap(), None);
        assert_eq!(p.describe(&["force"]), "");
    }
}
