//! [`ObjectBackend`]: any `object_store` store (memory, S3, GCS, Azure, or a test's own) as a
//! [`Backend`].
//!
//! Creates are `PutMode::Create` (S3 `If-None-Match: *`): the conditional create a writer's
//! fencing rests on, which `Store::check_conditional_create` verifies before a writer trusts a
//! store it did not build itself. One name per request: a create at the first free of several
//! names tries the first only.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt, PutMode, PutOptions, Result};

use super::backend::{Backend, FirstFree, Staged};

/// See the module docs.
pub struct ObjectBackend(pub Arc<dyn ObjectStore>);

impl fmt::Debug for ObjectBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ObjectBackend({})", self.0)
    }
}

#[async_trait]
impl Backend for ObjectBackend {
    async fn create(&self, paths: &[Path], data: &Staged, _: bool) -> Result<FirstFree> {
        let Some(first) = paths.first() else {
            return Ok(FirstFree::Taken(0));
        };
        let opts = PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        match self
            .0
            .put_opts(first, data.bytes.clone().into(), opts)
            .await
        {
            Ok(_) => Ok(FirstFree::Created(0)),
            // A taken name is `AlreadyExists`; a store may pass a conditional create's 412
            // through as `Precondition`.
            Err(object_store::Error::AlreadyExists { .. })
            | Err(object_store::Error::Precondition { .. }) => Ok(FirstFree::Taken(1)),
            Err(e) => Err(e),
        }
    }

    async fn get(&self, path: &Path) -> Result<Option<Bytes>> {
        match self.0.get(path).await {
            Ok(r) => Ok(Some(r.bytes().await?)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn head(&self, path: &Path) -> Result<bool> {
        match self.0.head(path).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn list(&self, prefix: &Path) -> Result<Vec<ObjectMeta>> {
        self.0.list(Some(prefix)).try_collect().await
    }

    async fn list_dirs(&self, prefix: &Path) -> Result<Vec<Path>> {
        Ok(self
            .0
            .list_with_delimiter(Some(prefix))
            .await?
            .common_prefixes)
    }

    async fn overwrite(&self, path: &Path, data: Bytes) -> Result<()> {
        self.0.put(path, data.into()).await.map(|_| ())
    }

    async fn delete(&self, path: &Path) -> Result<()> {
        match self.0.delete(path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }
}
