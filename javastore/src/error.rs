//! One error type for every Java file problem: it names the file, the offset where it makes
//! sense, and what was wrong, so that a refused takeover tells the operator exactly what to
//! look at.

use std::fmt;
use std::path::{Path, PathBuf};

#[derive(Debug)]
pub struct JavaError {
    pub path: PathBuf,
    pub offset: Option<u64>,
    pub what: String,
}

impl JavaError {
    pub fn new(path: &Path, what: impl Into<String>) -> JavaError {
        JavaError {
            path: path.to_path_buf(),
            offset: None,
            what: what.into(),
        }
    }

    pub fn at(path: &Path, offset: u64, what: impl Into<String>) -> JavaError {
        JavaError {
            path: path.to_path_buf(),
            offset: Some(offset),
            what: what.into(),
        }
    }

    pub fn io(path: &Path, op: &str, e: std::io::Error) -> JavaError {
        JavaError::new(path, format!("{op}: {e}"))
    }
}

impl fmt::Display for JavaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.offset {
            Some(o) => write!(f, "{} at offset {o}: {}", self.path.display(), self.what),
            None => write!(f, "{}: {}", self.path.display(), self.what),
        }
    }
}

impl std::error::Error for JavaError {}
