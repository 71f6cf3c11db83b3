//! [`ReportError`], what can go wrong while rendering.

use std::path::PathBuf;

/// What can go wrong while rendering.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A line is not a JSON object.
    #[error("line {line}: {reason}")]
    BadLine {
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// Reading the input or writing an output failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A plot could not be drawn.
    #[error("plot {name}: {reason}")]
    Plot {
        /// The plot's file name.
        name: String,
        /// The drawing error.
        reason: String,
    },
}
