//! [`render`]: the plots and the markdown report written to their files, and [`PLOTS`], the plots'
//! file names.

use std::path::{Path, PathBuf};

use crate::error::ReportError;
use crate::plots;
use crate::report::markdown_report;
use crate::run::Run;

/// The plots written into `img_dir` (file names; the README shows the first).
pub const PLOTS: [&str; 6] = [
    "locks-contended.svg",
    "locks-handoff.svg",
    "locks-distinct.svg",
    "locks-waiters.svg",
    "queues.svg",
    "leader-failover.svg",
];

/// Writes the plots into `img_dir` and the report to `markdown`, whose links to the plots are
/// relative to it. Returns the plots written (a plot without data is skipped).
///
/// # Errors
/// [`ReportError::Io`] when a file cannot be written, [`ReportError::Plot`] when a plot fails.
pub fn render(run: &Run, markdown: &Path, img_dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
    std::fs::create_dir_all(img_dir).map_err(|source| ReportError::Io { path: img_dir.into(), source })?;
    let written = plots::draw_all(run, img_dir)?;
    let link_base = relative_dir(markdown, img_dir);
    let text = markdown_report(run, &written, &link_base);
    if let Some(parent) = markdown.parent() {
        std::fs::create_dir_all(parent).map_err(|source| ReportError::Io { path: parent.into(), source })?;
    }
    std::fs::write(markdown, text).map_err(|source| ReportError::Io { path: markdown.into(), source })?;
    Ok(written)
}

/// `img_dir` as seen from the markdown file's directory (`img` for `docs/benchmarks.md` and
/// `docs/img`), else `img_dir` as given.
fn relative_dir(markdown: &Path, img_dir: &Path) -> String {
    let base = markdown.parent().unwrap_or(Path::new(""));
    match img_dir.strip_prefix(base) {
        Ok(relative) => relative.display().to_string(),
        Err(_) => img_dir.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_images_are_linked_relative_to_the_report() {
        assert_eq!(relative_dir(Path::new("docs/benchmarks.md"), Path::new("docs/img")), "img");
        assert_eq!(relative_dir(Path::new("/tmp/x/report.md"), Path::new("/other/img")), "/other/img");
    }
}
