//! PyPI file records: what each registry's page of each project said about the files it
//! lists (upstream URL, sidecar digest), remembered when the page is read and found again when
//! a file URL names that registry and project. Another registry's page, or another project's,
//! never answers for a file.

use super::{Page, Pypi};
use crate::registry::aliases::{FileRecord as StoredFile, file_key};
use crate::registry::error::RegistryError;
use crate::registry::settings::Front;
use crate::store::Digest;

/// What this registry's page of `project` says about each file it lists, keyed by this
/// registry, project and file digest (for [`crate::registry::aliases::Aliases::set_files`], which
/// writes only what changed).
pub(super) fn file_records(
    registry: &str,
    upstream: &str,
    project: &str,
    page: &Page,
) -> Vec<(String, StoredFile)> {
    page.files
        .iter()
        .map(|f| {
            (
                file_key(registry, project, &f.sha256),
                StoredFile {
                    upstream: upstream.to_string(),
                    url: f.url.clone(),
                    label: format!("{project}/{}", f.filename),
                    metadata_sha256: f.metadata_sha256.map(|d| d.hex()),
                },
            )
        })
        .collect()
}

impl Pypi<'_> {
    /// The one project of this registry whose page listed `filename` with `sha256`; none, or
    /// several (which is which cannot be told from the URL), is not found.
    pub(super) async fn only_listing(
        &self,
        front: &Front,
        sha256: &Digest,
        filename: &str,
    ) -> Result<String, RegistryError> {
        let (aliases, name, d) = (
            self.core.aliases.clone(),
            front.settings.name.clone(),
            *sha256,
        );
        let listed = tokio::task::spawn_blocking(move || aliases.listings(&name, &d))
            .await
            .map_err(|e| RegistryError::Internal(e.to_string()))?
            .map_err(RegistryError::from)?;
        let upstream = front.settings.upstream.as_str();
        let mut projects = listed
            .into_iter()
            .filter(|(p, r)| r.upstream == upstream && r.label == format!("{p}/{filename}"));
        match (projects.next(), projects.next()) {
            (Some((project, _)), None) => Ok(project),
            _ => Err(RegistryError::NotFound(format!(
                "file {filename} with sha256 {sha256} on exactly one project page (use the file URL the project page gives)"
            ))),
        }
    }

    /// The canonical `project` (judged by allow/deny) and the upstream record of a file that
    /// this registry's page of that project named; a file no such page named (whatever
    /// another registry or project said of it) is not fetched.
    pub(super) fn listed_file(
        &self,
        front: &Front,
        project: &str,
        sha256: &Digest,
        filename: &str,
    ) -> Result<(String, StoredFile), RegistryError> {
        let project = self.core.judge(front, project)?;
        let key = file_key(&front.settings.name, &project, sha256);
        let upstream = front.settings.upstream.as_str();
        self.core.aliases
            .file(&key)
            .map_err(RegistryError::from)?
            .filter(|r| r.upstream == upstream && r.label == format!("{project}/{filename}"))
            .map(|record| (project.clone(), record))
            .ok_or_else(|| {
                RegistryError::NotFound(format!(
                    "file {filename} with sha256 {sha256} on the page of project {project} read so far"
                ))
            })
    }
}
