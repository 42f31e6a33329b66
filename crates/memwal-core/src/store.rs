//! The object store memwal writes to, and every object path it uses.
//!
//! [`Store`] wraps an `object_store` implementation with the few operations memwal needs:
//! create-if-absent puts (the only way a WAL entry, manifest version or generation file is ever
//! written), gets, existence probes and listings. Every object path (`bitrev64` file names,
//! `_mem_wal/<shard>/…`) is built in [`ShardPaths`] and nowhere else.
//!
//! # Durability of the local store
//! A local directory is served by [`local::LocalStore`]: a put writes a staging file,
//! `fdatasync`s it, hard-links it to its final name (which fails if the name exists, giving
//! put-if-not-exists), then `fsync`s the parent directory, and every directory it had to
//! create. Its persistence points go through the [`fs::Fs`] trait, so the power-loss simulator
//! [`sim_fs::SimFs`] can replace the disk in tests.
//!
//! Every store is wrapped in [`faults::FaultInjectingStore`], whose faults are all off unless a
//! test switches them on, so Rust tests and the JavaScript `ObjectStore.faults` share one
//! mechanism.

pub mod faults;
pub mod fs;
pub mod local;
pub mod sim_fs;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use uuid::Uuid;

use crate::error::{Error, Result};
use faults::{FaultInjectingStore, Faults};
use fs::{Fs, Staged, StdFs};
use local::LocalStore;

/// Outcome of a create-if-absent put.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateOutcome {
    /// We created the object.
    Created,
    /// An object already existed at that path; nothing was written.
    AlreadyExists,
}

/// Outcome of a create at the first free of several locations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FirstFree {
    /// We created the object at this index of the locations.
    Created(usize),
    /// This many of the locations, from the first, were found taken; nothing was written.
    Taken(usize),
}

/// Put-option extension: if the put's location is taken, create the same data at these
/// locations instead, the first free one in order. Only [`local::LocalStore`] reads it (it
/// writes and syncs the data once for all of them); other stores ignore extensions.
#[derive(Debug, Clone)]
pub(crate) struct OrNext(pub Vec<Path>);

/// Put-option extension: the data of a create, already staged in the put's directory by
/// [`local::LocalStore::stage`]; the put only names it.
#[derive(Debug, Clone)]
pub(crate) struct Prestaged(pub Arc<Staged>);

/// Data for [`Store::put_if_absent_first_free`], readied ahead of it by [`Store::stage`].
#[derive(Debug, Clone)]
pub(crate) struct StagedPut {
    bytes: Bytes,
    local: Option<Arc<Staged>>,
}

/// Put-result extension of a put with [`OrNext`]: the index created (0: the put's location).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CreatedAt(pub usize);

/// A handle on an object store plus the root prefix memwal works under. Cheap to clone;
/// clones share the underlying store and its fault controller.
#[derive(Clone)]
pub struct Store {
    object_store: Arc<dyn ObjectStore>,
    root: Path,
    faults: Arc<Faults>,
    location: String,
    /// Whether conditional create must be verified before a writer trusts this store (every
    /// store but memwal's own local and in-memory ones), and whether it was.
    create_check: Arc<tokio::sync::OnceCell<()>>,
    needs_create_check: bool,
    /// memwal's local store, when it is the backend: it honours [`OrNext`] and can stage.
    local: Option<Arc<LocalStore>>,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("location", &self.location)
            .finish()
    }
}

fn memory_registry() -> &'static Mutex<HashMap<String, Store>> {
    static REGISTRY: OnceLock<Mutex<HashMap<String, Store>>> = OnceLock::new();
    REGISTRY.get_or_init(|| Mutex::new(HashMap::new()))
}

impl Store {
    /// A local directory, with fsync of files and directories on. The directory (and its
    /// parents) is created on the first write, so a reader never creates anything.
    pub fn local(dir: impl AsRef<std::path::Path>) -> Result<Self> {
        let dir = dir.as_ref();
        if dir.as_os_str().is_empty() {
            return Err(Error::invalid(
                "local store path is empty; pass a directory such as ./data",
            ));
        }
        let abs = std::path::absolute(dir).map_err(|e| {
            Error::io(
                format!("cannot resolve local store path {}", dir.display()),
                e,
            )
        })?;
        if abs.exists() && !abs.is_dir() {
            return Err(Error::invalid(format!(
                "local store path {} exists but is not a directory; pass a directory",
                abs.display()
            )));
        }
        Ok(Self::on_fs(Arc::new(StdFs), abs, true))
    }

    /// A store in directory `dir` of `fs` (absolute). `fsync: false` makes nothing durable
    /// across a power loss: only for tests that must see that happen.
    pub fn on_fs(fs: Arc<dyn Fs>, dir: std::path::PathBuf, fsync: bool) -> Self {
        let faults = Arc::new(Faults::default());
        let location = dir.display().to_string();
        let local = Arc::new(LocalStore::new(fs, dir, fsync, faults.clone()));
        let mut s = Self::with_faults(local.clone(), Path::default(), location, faults);
        s.local = Some(local);
        s
    }

    /// A fresh, private in-memory store (nothing survives the process).
    pub fn memory() -> Self {
        Self::from_object_store(Arc::new(InMemory::new()), Path::default(), "memory://")
    }

    /// The in-process in-memory store registered under `name`: every call with the same name
    /// returns a handle on the same objects (and the same fault controller), so two writers in
    /// one process can race on it.
    pub fn named_memory(name: &str) -> Self {
        let mut reg = memory_registry().lock().unwrap_or_else(|e| e.into_inner());
        reg.entry(name.to_string())
            .or_insert_with(|| {
                Self::from_object_store(
                    Arc::new(InMemory::new()),
                    Path::default(),
                    format!("memory://{name}"),
                )
            })
            .clone()
    }

    /// Parses a location: `file:///abs/path`, `memory://NAME`, or a plain local path; with the
    /// `s3`/`gcs`/`azure` features also `s3://bucket/prefix`, `gs://bucket/prefix` and
    /// `az://container/prefix` (credentials from the usual environment variables).
    pub fn from_uri(uri: &str) -> Result<Self> {
        Self::from_uri_with(uri, &[])
    }

    /// [`Store::from_uri`] with storage options for object stores: `object_store`
    /// configuration keys such as `region`, `endpoint`, `allow_http`, `access_key_id`,
    /// `secret_access_key`, `session_token`. They override the environment.
    pub fn from_uri_with(uri: &str, options: &[(String, String)]) -> Result<Self> {
        if let Some((scheme, _)) = uri.split_once("://")
            && matches!(
                scheme,
                "s3" | "s3a" | "gs" | "az" | "azure" | "abfs" | "abfss"
            )
        {
            return cloud::open(scheme, uri, options);
        }
        if !options.is_empty() {
            return Err(Error::invalid(format!(
                "storage options apply to object stores (s3://, gs://, az://), not to {uri}"
            )));
        }
        if uri.is_empty() {
            return Err(Error::invalid(
                "location is empty; pass a local directory, file:///abs/path or memory://NAME",
            ));
        }
        if let Some(rest) = uri.strip_prefix("memory://") {
            return Ok(Self::named_memory(rest));
        }
        if let Some(rest) = uri.strip_prefix("file://") {
            if !rest.starts_with('/') {
                return Err(Error::invalid(format!(
                    "file URI {uri} must be absolute (file:///abs/path); use a plain path for relative directories"
                )));
            }
            return Self::local(rest);
        }
        if let Some((scheme, _)) = uri.split_once("://") {
            return Err(Error::invalid(format!(
                "unsupported location scheme `{scheme}://` in {uri}; use a local path, file:///abs/path or memory://NAME"
            )));
        }
        Self::local(uri)
    }

    /// Wraps any `object_store` implementation (used for tests and custom backends). Objects go
    /// under `root`.
    pub fn from_object_store(
        object_store: Arc<dyn ObjectStore>,
        root: Path,
        location: impl Into<String>,
    ) -> Self {
        let mut s = Self::with_faults(object_store, root, location, Arc::new(Faults::default()));
        s.needs_create_check = true;
        s
    }

    fn with_faults(
        object_store: Arc<dyn ObjectStore>,
        root: Path,
        location: impl Into<String>,
        faults: Arc<Faults>,
    ) -> Self {
        let wrapped = FaultInjectingStore::new(object_store, faults.clone());
        Store {
            object_store: Arc::new(wrapped),
            root,
            faults,
            location: location.into(),
            create_check: Arc::new(tokio::sync::OnceCell::new()),
            needs_create_check: false,
            local: None,
        }
    }

    /// Verifies, once per store, that it really refuses to overwrite on create
    /// (put-if-not-exists): WAL fencing depends on it. A store that accepts the second create
    /// (or cannot do conditional creates at all) is refused with a clear error instead of
    /// silently losing data to a stale writer.
    pub async fn check_conditional_create(&self) -> Result<()> {
        if !self.needs_create_check {
            return Ok(());
        }
        self.create_check
            .get_or_try_init(|| async {
                let probe = self
                    .root
                    .clone()
                    .join(MEM_WAL_DIR)
                    .join(".create-probe")
                    .join(uuid::Uuid::new_v4().to_string().as_str());
                let unsafe_store = |why: String| {
                    Error::invalid(format!(
                        "the object store at {} cannot be used by a writer: {why}. memwal needs conditional create (put-if-not-exists, e.g. S3 `If-None-Match: *`) to fence stale writers; use a store that supports it (AWS S3, GCS, Azure, or an S3-compatible server with conditional writes)",
                        self.location
                    ))
                };
                let first = self
                    .put_if_absent(&probe, Bytes::from_static(b"1"))
                    .await
                    .map_err(|e| match e {
                        object_store::Error::NotImplemented { .. } => {
                            unsafe_store(format!("it does not implement conditional create ({e})"))
                        }
                        e => Error::io(
                            format!(
                                "probing conditional create at {}: a create-if-absent put failed. If the error persists, the store may not support conditional writes (S3 `If-None-Match: *`), which a writer needs to fence stale writers",
                                self.location
                            ),
                            e,
                        ),
                    })?;
                let second = self
                    .put_if_absent(&probe, Bytes::from_static(b"2"))
                    .await
                    .map_err(|e| Error::io(format!("probing conditional create at {}", self.location), e))?;
                let _ = self.object_store.delete(&probe).await;
                match (first, second) {
                    (CreateOutcome::Created, CreateOutcome::AlreadyExists) => Ok(()),
                    _ => Err(unsafe_store(
                        "it overwrote an existing object on a create-if-absent put".to_string(),
                    )),
                }
            })
            .await
            .map(|_| ())
    }

    /// The fault controller of this store (all faults off by default).
    pub fn faults(&self) -> &Arc<Faults> {
        &self.faults
    }

    /// A human-readable description of where this store lives.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// The paths of one shard in this store.
    pub fn shard_paths(&self, shard_id: Uuid) -> ShardPaths {
        ShardPaths::new(&self.root, shard_id)
    }

    /// Shard ids with a `_mem_wal/<uuid>/` directory in this store.
    pub async fn list_shards(&self) -> Result<Vec<Uuid>> {
        let prefix = self.root.clone().join(MEM_WAL_DIR);
        let listing = self
            .object_store
            .list_with_delimiter(Some(&prefix))
            .await
            .map_err(|e| Error::io(format!("listing shards under {prefix}"), e))?;
        let mut ids: Vec<Uuid> = listing
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename().and_then(|n| Uuid::parse_str(n).ok()))
            .collect();
        ids.sort();
        Ok(ids)
    }

    /// Writes `bytes` at `path` only if nothing is there (`PutMode::Create`).
    pub(crate) async fn put_if_absent(
        &self,
        path: &Path,
        bytes: Bytes,
    ) -> object_store::Result<CreateOutcome> {
        let opts = PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        match self
            .object_store
            .put_opts(path, PutPayload::from_bytes(bytes), opts)
            .await
        {
            Ok(_) => Ok(CreateOutcome::Created),
            Err(object_store::Error::AlreadyExists { .. })
            | Err(object_store::Error::Precondition { .. }) => Ok(CreateOutcome::AlreadyExists),
            Err(e) => Err(e),
        }
    }

    /// Readies `bytes` for [`Store::put_if_absent_first_free`] in the directory of `near`
    /// (any location in it). A local store writes and syncs them now, so that this can overlap
    /// other work and the put only links a name and syncs the directory; elsewhere this does
    /// nothing.
    pub(crate) async fn stage(&self, near: &Path, bytes: Bytes) -> object_store::Result<StagedPut> {
        let local = match &self.local {
            Some(store) => Some(store.stage(near, bytes.clone()).await?),
            None => None,
        };
        Ok(StagedPut { bytes, local })
    }

    /// Creates `staged` at the first free of `paths` (names in one directory), in order. A
    /// local store has written and synced the data once, so losing a race for a slot costs a
    /// `link`, not another sync; elsewhere this is a create at `paths[0]`.
    pub(crate) async fn put_if_absent_first_free(
        &self,
        paths: &[Path],
        staged: &StagedPut,
    ) -> object_store::Result<FirstFree> {
        let Some((first, rest)) = paths.split_first() else {
            return Ok(FirstFree::Taken(0));
        };
        let mut opts = PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        let tried = match &staged.local {
            Some(prestaged) => {
                opts.extensions.insert(OrNext(rest.to_vec()));
                opts.extensions.insert(Prestaged(prestaged.clone()));
                paths.len()
            }
            None => 1,
        };
        let bytes = staged.bytes.clone();
        match self
            .object_store
            .put_opts(first, PutPayload::from_bytes(bytes), opts)
            .await
        {
            Ok(r) => Ok(FirstFree::Created(
                r.extensions.get::<CreatedAt>().map_or(0, |c| c.0),
            )),
            Err(object_store::Error::AlreadyExists { .. })
            | Err(object_store::Error::Precondition { .. }) => Ok(FirstFree::Taken(tried)),
            Err(e) => Err(e),
        }
    }

    /// Overwrites `path` (only for the best-effort `version_hint.json`).
    pub(crate) async fn put_overwrite(
        &self,
        path: &Path,
        bytes: Bytes,
    ) -> object_store::Result<()> {
        self.object_store
            .put(path, PutPayload::from_bytes(bytes))
            .await
            .map(|_| ())
    }

    /// The object at `path`, or `None` if there is none.
    pub(crate) async fn get(&self, path: &Path) -> object_store::Result<Option<Bytes>> {
        match self.object_store.get(path).await {
            Ok(r) => Ok(Some(r.bytes().await?)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Whether an object exists at `path`. Errors other than not-found are errors, never
    /// "absent" (reference §1.3).
    pub(crate) async fn exists(&self, path: &Path) -> object_store::Result<bool> {
        match self.object_store.head(path).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Every object under `prefix` (recursive).
    pub(crate) async fn list(&self, prefix: &Path) -> object_store::Result<Vec<ObjectMeta>> {
        self.object_store.list(Some(prefix)).try_collect().await
    }
}

/// Name of the directory holding all shards under a store root.
pub const MEM_WAL_DIR: &str = "_mem_wal";

/// `n` bit-reversed and printed as 64 binary digits, then `.ext` (reference §1.2): spreads
/// sequential keys across S3 partitions.
pub fn bitrev64_name(n: u64, ext: &str) -> String {
    format!("{:064b}.{ext}", n.reverse_bits())
}

/// Inverse of [`bitrev64_name`]: the number, if `name` is exactly 64 binary digits, a dot and
/// an alphanumeric extension. Anything else (staging files such as `object_store`'s
/// `<name>#1`, hints, foreign files) is `None`.
pub fn parse_bitrev64_name(name: &str) -> Option<u64> {
    let (stem, ext) = name.split_once('.')?;
    if stem.len() != 64
        || !stem.bytes().all(|b| b == b'0' || b == b'1')
        || ext.is_empty()
        || !ext.bytes().all(|b| b.is_ascii_alphanumeric())
    {
        return None;
    }
    u64::from_str_radix(stem, 2).ok().map(u64::reverse_bits)
}

/// Eight random lowercase hex characters: the prefix of a generation directory, fresh per flush
/// attempt so a retry never reuses a partially written directory.
pub fn random8hex() -> String {
    format!("{:08x}", rand::random::<u32>())
}

/// Every object path of one shard (reference §1.2 layout).
#[derive(Debug, Clone)]
pub struct ShardPaths {
    shard_id: Uuid,
    shard_dir: Path,
}

impl ShardPaths {
    fn new(root: &Path, shard_id: Uuid) -> Self {
        let shard_dir = root
            .clone()
            .join(MEM_WAL_DIR)
            .join(shard_id.hyphenated().to_string().as_str());
        ShardPaths {
            shard_id,
            shard_dir,
        }
    }

    /// The shard's id.
    pub fn shard_id(&self) -> Uuid {
        self.shard_id
    }

    /// `_mem_wal/<shard>`
    pub fn shard_dir(&self) -> &Path {
        &self.shard_dir
    }

    /// `_mem_wal/<shard>/manifest`
    pub fn manifest_dir(&self) -> Path {
        self.shard_dir.clone().join("manifest")
    }

    /// `_mem_wal/<shard>/manifest/<bitrev64(version)>.binpb`
    pub fn manifest(&self, version: u64) -> Path {
        self.manifest_dir()
            .join(bitrev64_name(version, "binpb").as_str())
    }

    /// `_mem_wal/<shard>/manifest/version_hint.json`
    pub fn version_hint(&self) -> Path {
        self.manifest_dir().join("version_hint.json")
    }

    /// `_mem_wal/<shard>/wal`
    pub fn wal_dir(&self) -> Path {
        self.shard_dir.clone().join("wal")
    }

    /// `_mem_wal/<shard>/wal/<bitrev64(position)>.arrow`
    pub fn wal_entry(&self, position: u64) -> Path {
        self.wal_dir()
            .join(bitrev64_name(position, "arrow").as_str())
    }

    /// `<random8hex>_gen_<g>`: a generation directory name, relative to the shard directory.
    pub fn new_generation_dir_name(generation: u64) -> String {
        format!("{}_gen_{generation}", random8hex())
    }

    /// `_mem_wal/<shard>/<dir>/data.parquet`
    pub fn generation_file(&self, dir_name: &str) -> Path {
        self.shard_dir
            .clone()
            .join(dir_name)
            .join(GENERATION_FILE_NAME)
    }
}

/// Object stores off the local disk, through `object_store`'s backends.
///
/// Options are `object_store` configuration keys (`allow_http`), or the same in camelCase
/// (`allowHttp`), as the JavaScript API passes them. They override the environment (each
/// builder starts `from_env`).
///
/// memwal adds three options of its own: `instance_credentials` (below), and, as in Lance,
/// `client_max_retries` and `client_retry_timeout` (seconds): how often and how long the
/// client retries one request (503, 500, a reset connection) before memwal sees the error.
///
/// # Credentials
/// Every backend falls back to the cloud's instance metadata service (a link-local address)
/// when no credentials are configured. memwal does not let that happen silently: a location
/// with no credential source fails at once with an error saying what to set, unless the
/// caller opts in with the memwal option `instance_credentials` (`instanceCredentials`). So a
/// misconfigured process fails fast instead of timing out against an address that is not
/// there, and tests never reach beyond the machine.
mod cloud {
    use super::*;

    /// memwal's own option: use the instance's (or pod's) credentials from the metadata service.
    const INSTANCE_CREDENTIALS: &str = "instance_credentials";
    /// memwal's own option (as in Lance): retries of one request inside the object store
    /// client (default 10), before memwal's own WAL retries (`max_wal_persist_retries`).
    const CLIENT_MAX_RETRIES: &str = "client_max_retries";
    /// memwal's own option (as in Lance): seconds after which the client stops retrying one
    /// request (default 180).
    const CLIENT_RETRY_TIMEOUT: &str = "client_retry_timeout";

    fn parse_uint(key: &str, value: &str) -> Result<u64> {
        value.parse::<u64>().map_err(|_| {
            Error::invalid(format!(
                "invalid storage option `{key}`: expected a non-negative integer, got {value:?}"
            ))
        })
    }

    /// `allowHttp` → `allow_http`; snake_case keys are unchanged.
    pub(super) fn option_key(key: &str) -> String {
        let mut out = String::with_capacity(key.len() + 4);
        for c in key.chars() {
            if c.is_ascii_uppercase() {
                out.push('_');
                out.push(c.to_ascii_lowercase());
            } else {
                out.push(c);
            }
        }
        out
    }

    fn unknown_option(scheme: &str, key: &str, snake: &str, known: &str) -> Error {
        let also = if snake != key {
            format!(" (object_store key `{snake}`)")
        } else {
            String::new()
        };
        Error::invalid(format!(
            "unknown storage option `{key}`{also} for {scheme}:// locations; known options include {known}, and every other object_store configuration key of that store"
        ))
    }

    fn no_credentials(uri: &str, how: &str) -> Error {
        Error::invalid(format!(
            "no credentials for {uri}: {how}. To use the credentials of the machine's role from the cloud's metadata service instead (EC2 instance profile, GCE service account, Azure managed identity), pass the storage option instanceCredentials: true"
        ))
    }

    fn is_set(v: Option<String>) -> bool {
        v.is_some_and(|v| !v.is_empty() && v != "false")
    }

    /// `scheme://bucket/prefix` with `options` (object_store configuration keys).
    pub(super) fn open(scheme: &str, uri: &str, options: &[(String, String)]) -> Result<Store> {
        let url = url::Url::parse(uri)
            .map_err(|e| Error::invalid(format!("location {uri} is not a valid URI: {e}")))?;
        let root = Path::from_url_path(url.path())
            .map_err(|e| Error::invalid(format!("location {uri} has an invalid path: {e}")))?;
        let mut instance_credentials = false;
        let mut retry = object_store::RetryConfig::default();
        let mut config: Vec<(&str, String, &str)> = Vec::with_capacity(options.len());
        for (key, value) in options {
            let snake = option_key(key);
            if snake == CLIENT_MAX_RETRIES {
                retry.max_retries = parse_uint(key, value)? as usize;
            } else if snake == CLIENT_RETRY_TIMEOUT {
                retry.retry_timeout = std::time::Duration::from_secs(parse_uint(key, value)?);
            } else if snake == INSTANCE_CREDENTIALS {
                instance_credentials = match value.as_str() {
                    "true" => true,
                    "false" => false,
                    other => {
                        return Err(Error::invalid(format!(
                            "invalid storage option `{key}`: expected true or false, got {other:?}"
                        )));
                    }
                };
            } else {
                config.push((key.as_str(), snake, value.as_str()));
            }
        }
        let built: object_store::Result<Arc<dyn ObjectStore>> = match scheme {
            #[cfg(feature = "s3")]
            "s3" | "s3a" => {
                use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey as K};
                let mut b = AmazonS3Builder::from_env().with_url(uri).with_retry(retry);
                for (key, snake, value) in &config {
                    let k = snake.parse::<K>().map_err(|_| {
                        unknown_option(
                            scheme,
                            key,
                            snake,
                            "region, endpoint, allowHttp, accessKeyId, secretAccessKey, sessionToken, virtualHostedStyleRequest",
                        )
                    })?;
                    b = b.with_config(k, *value);
                }
                let has_credentials = [
                    K::AccessKeyId,
                    K::WebIdentityTokenFile,
                    K::ContainerCredentialsRelativeUri,
                    K::ContainerCredentialsFullUri,
                    K::SkipSignature,
                    K::MetadataEndpoint,
                ]
                .iter()
                .any(|k| is_set(b.get_config_value(k)));
                if !has_credentials && !instance_credentials {
                    return Err(no_credentials(
                        uri,
                        "pass the storage options accessKeyId and secretAccessKey (and sessionToken for temporary credentials), or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_WEB_IDENTITY_TOKEN_FILE or AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                    ));
                }
                b.build().map(|s| Arc::new(s) as _)
            }
            #[cfg(feature = "gcs")]
            "gs" => {
                use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey as K};
                let mut b = GoogleCloudStorageBuilder::from_env()
                    .with_url(uri)
                    .with_retry(retry);
                for (key, snake, value) in &config {
                    let k = snake.parse::<K>().map_err(|_| {
                        unknown_option(
                            scheme,
                            key,
                            snake,
                            "serviceAccount (a key file path), serviceAccountKey (the key as JSON), applicationCredentials",
                        )
                    })?;
                    b = b.with_config(k, *value);
                }
                let has_credentials = [
                    K::ServiceAccount,
                    K::ServiceAccountKey,
                    K::ApplicationCredentials,
                    K::SkipSignature,
                ]
                .iter()
                .any(|k| is_set(b.get_config_value(k)))
                    || gcloud_default_credentials_exist();
                if !has_credentials && !instance_credentials {
                    return Err(no_credentials(
                        uri,
                        "pass the storage option serviceAccount (a key file path) or serviceAccountKey (the key as JSON), set GOOGLE_SERVICE_ACCOUNT or GOOGLE_APPLICATION_CREDENTIALS, or run `gcloud auth application-default login`",
                    ));
                }
                b.build().map(|s| Arc::new(s) as _)
            }
            #[cfg(feature = "azure")]
            "az" | "azure" | "abfs" | "abfss" => {
                use object_store::azure::{AzureConfigKey as K, MicrosoftAzureBuilder};
                let mut b = MicrosoftAzureBuilder::from_env()
                    .with_url(uri)
                    .with_retry(retry);
                for (key, snake, value) in &config {
                    let k = snake.parse::<K>().map_err(|_| {
                        unknown_option(
                            scheme,
                            key,
                            snake,
                            "accountName, accessKey, sasKey, clientId, clientSecret, tenantId, endpoint",
                        )
                    })?;
                    b = b.with_config(k, *value);
                }
                let has_credentials = [
                    K::AccessKey,
                    K::SasKey,
                    K::Token,
                    K::ClientSecret,
                    K::FederatedTokenFile,
                    K::UseAzureCli,
                    K::UseEmulator,
                    K::SkipSignature,
                    K::MsiEndpoint,
                ]
                .iter()
                .any(|k| is_set(b.get_config_value(k)));
                if !has_credentials && !instance_credentials {
                    return Err(no_credentials(
                        uri,
                        "pass the storage options accountName and accessKey (or sasKey, or clientId, clientSecret and tenantId), or set AZURE_STORAGE_ACCOUNT_NAME and AZURE_STORAGE_ACCOUNT_KEY",
                    ));
                }
                b.build().map(|s| Arc::new(s) as _)
            }
            other => {
                return Err(Error::invalid(format!(
                    "`{other}://` locations need memwal built with that object store's feature"
                )));
            }
        };
        let object_store = built.map_err(|e| {
            Error::invalid(format!("cannot configure the object store for {uri}: {e}"))
        })?;
        Ok(Store::from_object_store(object_store, root, uri))
    }

    /// Whether gcloud's application-default credentials file exists (object_store reads it).
    #[cfg(feature = "gcs")]
    fn gcloud_default_credentials_exist() -> bool {
        std::env::var_os("HOME").is_some_and(|home| {
            std::path::Path::new(&home)
                .join(".config/gcloud/application_default_credentials.json")
                .exists()
        })
    }
}

/// File name of a generation's data inside its directory.
pub const GENERATION_FILE_NAME: &str = "data.parquet";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitrev64_names_match_the_reference() {
        assert_eq!(0u64.reverse_bits(), 0);
        assert_eq!(1u64.reverse_bits(), 0x8000_0000_0000_0000);
        assert_eq!(5u64.reverse_bits(), 0xa000_0000_0000_0000);
        assert_eq!(
            bitrev64_name(1, "binpb"),
            format!("1{}.binpb", "0".repeat(63))
        );
        assert_eq!(
            bitrev64_name(5, "lance"),
            format!("101{}.lance", "0".repeat(61))
        );
        for n in [1u64, 2, 5, 1000, u64::MAX, 1 << 40] {
            assert_eq!(parse_bitrev64_name(&bitrev64_name(n, "arrow")), Some(n));
        }
    }

    #[test]
    fn foreign_names_do_not_parse() {
        for bad in [
            "invalid",
            "123.binpb",
            &format!("{}.binpb", "1".repeat(65)),
            &format!("{}2.arrow", "0".repeat(63)),
            "version_hint.json",
            // object_store's staging files, and our name without an extension.
            &format!("{}.arrow#1", "0".repeat(64)),
            &format!("{}.arrow%231", "1".repeat(64)),
            &format!("{}.binpb.tmp", "1".repeat(64)),
            &format!("{}.", "1".repeat(64)),
            &"1".repeat(64),
        ] {
            assert_eq!(parse_bitrev64_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn shard_paths_follow_the_layout() {
        let id = Uuid::parse_str("550e8400-e29b-41d4-a716-446655440000").unwrap();
        let p = ShardPaths::new(&Path::from("my/dataset"), id);
        assert_eq!(
            p.wal_dir().to_string(),
            "my/dataset/_mem_wal/550e8400-e29b-41d4-a716-446655440000/wal"
        );
        assert_eq!(
            p.manifest_dir().to_string(),
            "my/dataset/_mem_wal/550e8400-e29b-41d4-a716-446655440000/manifest"
        );
        assert_eq!(
            p.generation_file("a1b2c3d4_gen_5").to_string(),
            "my/dataset/_mem_wal/550e8400-e29b-41d4-a716-446655440000/a1b2c3d4_gen_5/data.parquet"
        );
        let p = ShardPaths::new(&Path::default(), id);
        assert_eq!(
            p.wal_dir().to_string(),
            "_mem_wal/550e8400-e29b-41d4-a716-446655440000/wal"
        );
    }

    #[test]
    fn random8hex_is_eight_hex_chars_and_varies() {
        let a = random8hex();
        assert_eq!(a.len(), 8);
        assert!(
            a.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        let distinct: std::collections::HashSet<_> = (0..16).map(|_| random8hex()).collect();
        assert!(distinct.len() > 1);
    }

    #[test]
    fn locations_parse() {
        assert!(Store::from_uri("").is_err());
        let e = Store::from_uri("gopher://x").unwrap_err();
        assert!(e.to_string().contains("gopher://"), "{e}");
        let e = Store::from_uri("file://relative/dir").unwrap_err();
        assert!(e.to_string().contains("absolute"), "{e}");
        let a = Store::from_uri("memory://shared-x").unwrap();
        let b = Store::from_uri("memory://shared-x").unwrap();
        assert!(Arc::ptr_eq(a.faults(), b.faults()));
        let c = Store::from_uri("memory://other-x").unwrap();
        assert!(!Arc::ptr_eq(a.faults(), c.faults()));
        let dir = tempfile::tempdir().unwrap();
        let s = Store::from_uri(&format!("file://{}", dir.path().display())).unwrap();
        assert!(s.location().contains(dir.path().to_str().unwrap()));
    }

    /// An object store that ignores put-if-not-exists (like S3 servers without conditional
    /// writes): every create overwrites.
    #[derive(Debug)]
    struct IgnoresCreate(InMemory);

    impl fmt::Display for IgnoresCreate {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "IgnoresCreate")
        }
    }

    #[async_trait::async_trait]
    impl ObjectStore for IgnoresCreate {
        async fn put_opts(
            &self,
            location: &Path,
            payload: PutPayload,
            _opts: PutOptions,
        ) -> object_store::Result<object_store::PutResult> {
            self.0.put(location, payload).await
        }
        async fn put_multipart_opts(
            &self,
            location: &Path,
            opts: object_store::PutMultipartOptions,
        ) -> object_store::Result<Box<dyn object_store::MultipartUpload>> {
            self.0.put_multipart_opts(location, opts).await
        }
        async fn get_opts(
            &self,
            location: &Path,
            options: object_store::GetOptions,
        ) -> object_store::Result<object_store::GetResult> {
            self.0.get_opts(location, options).await
        }
        fn delete_stream(
            &self,
            locations: futures::stream::BoxStream<'static, object_store::Result<Path>>,
        ) -> futures::stream::BoxStream<'static, object_store::Result<Path>> {
            self.0.delete_stream(locations)
        }
        fn list(
            &self,
            prefix: Option<&Path>,
        ) -> futures::stream::BoxStream<'static, object_store::Result<ObjectMeta>> {
            self.0.list(prefix)
        }
        async fn list_with_delimiter(
            &self,
            prefix: Option<&Path>,
        ) -> object_store::Result<object_store::ListResult> {
            self.0.list_with_delimiter(prefix).await
        }
        async fn copy_opts(
            &self,
            from: &Path,
            to: &Path,
            options: object_store::CopyOptions,
        ) -> object_store::Result<()> {
            self.0.copy_opts(from, to, options).await
        }
    }

    #[tokio::test]
    async fn a_store_without_conditional_create_is_refused() {
        let store = Store::from_object_store(
            Arc::new(IgnoresCreate(InMemory::new())),
            Path::default(),
            "s3://no-conditional-writes",
        );
        let e = store.check_conditional_create().await.unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::InvalidArgument);
        assert!(e.to_string().contains("conditional create"), "{e}");
        assert!(e.to_string().contains("s3://no-conditional-writes"), "{e}");
        // A store that honours it passes, once.
        let good = Store::from_object_store(Arc::new(InMemory::new()), Path::default(), "ok");
        good.check_conditional_create().await.unwrap();
        good.check_conditional_create().await.unwrap();
        assert!(
            good.list(&Path::default()).await.unwrap().is_empty(),
            "the probe is removed"
        );
    }

    #[test]
    fn cloud_locations_parse_with_options() {
        let s = Store::from_uri_with(
            "s3://bucket/some/prefix",
            &[
                ("region".into(), "us-east-1".into()),
                ("endpoint".into(), "http://127.0.0.1:9".into()),
                ("allow_http".into(), "true".into()),
                ("access_key_id".into(), "k".into()),
                ("secret_access_key".into(), "s".into()),
            ],
        )
        .unwrap();
        assert_eq!(s.location(), "s3://bucket/some/prefix");
        assert_eq!(s.root.as_ref(), "some/prefix");
        let e =
            Store::from_uri_with("s3://bucket", &[("no_such_key".into(), "1".into())]).unwrap_err();
        assert!(e.to_string().contains("no_such_key"), "{e}");
        let e = Store::from_uri_with("/tmp/x", &[("region".into(), "x".into())]).unwrap_err();
        assert!(e.to_string().contains("storage options"), "{e}");
    }

    #[test]
    fn storage_options_may_be_camel_case() {
        assert_eq!(cloud::option_key("allowHttp"), "allow_http");
        assert_eq!(cloud::option_key("accessKeyId"), "access_key_id");
        assert_eq!(cloud::option_key("allow_http"), "allow_http");
        let opts = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let s = Store::from_uri_with(
            "s3://bucket/p",
            &opts(&[
                ("region", "us-east-1"),
                ("endpoint", "http://127.0.0.1:9"),
                ("allowHttp", "true"),
                ("accessKeyId", "k"),
                ("secretAccessKey", "s"),
                ("sessionToken", "t"),
                ("virtualHostedStyleRequest", "false"),
            ]),
        )
        .unwrap();
        assert_eq!(s.location(), "s3://bucket/p");
        let e = Store::from_uri_with(
            "s3://bucket",
            &opts(&[("fooBar", "1"), ("accessKeyId", "k")]),
        )
        .unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::InvalidArgument);
        assert!(e.to_string().contains("`fooBar`"), "{e}");
        assert!(e.to_string().contains("`foo_bar`"), "{e}");
        let e = Store::from_uri_with(
            "s3://bucket",
            &opts(&[("allowHttp", "yes"), ("accessKeyId", "k")]),
        )
        .unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::InvalidArgument, "{e}");
    }

    /// No network: without credentials every backend would ask the cloud's metadata service;
    /// memwal refuses before building a client, unless asked to use instance credentials.
    #[test]
    fn cloud_locations_without_credentials_are_refused_with_what_to_set() {
        if [
            "AWS_ACCESS_KEY_ID",
            "GOOGLE_SERVICE_ACCOUNT",
            "AZURE_STORAGE_ACCOUNT_KEY",
        ]
        .iter()
        .any(|v| std::env::var_os(v).is_some())
        {
            return; // the environment supplies credentials
        }
        for (uri, hint) in [
            ("s3://bucket/prefix", "accessKeyId"),
            ("gs://bucket/prefix", "serviceAccount"),
            ("az://container/prefix", "accountName"),
        ] {
            let opts: &[(String, String)] = if uri.starts_with("az") {
                &[("accountName".to_string(), "acct".to_string())]
            } else {
                &[]
            };
            let e = Store::from_uri_with(uri, opts).unwrap_err();
            assert_eq!(e.code(), crate::ErrorCode::InvalidArgument, "{uri}: {e}");
            let m = e.to_string();
            assert!(m.contains("no credentials for"), "{m}");
            assert!(m.contains(uri), "{m}");
            assert!(m.contains(hint), "{m}");
            assert!(m.contains("instanceCredentials"), "{m}");
            // Opting in builds the store (credentials are only fetched on first use).
            let mut with = opts.to_vec();
            with.push(("instanceCredentials".into(), "true".into()));
            let s = Store::from_uri_with(uri, &with).unwrap();
            assert_eq!(s.location(), uri);
        }
        let e = Store::from_uri_with(
            "s3://bucket",
            &[("instanceCredentials".into(), "maybe".into())],
        )
        .unwrap_err();
        assert!(e.to_string().contains("expected true or false"), "{e}");
        let e = Store::from_uri_with(
            "s3://bucket",
            &[
                ("accessKeyId".into(), "k".into()),
                ("clientMaxRetries".into(), "-1".into()),
            ],
        )
        .unwrap_err();
        assert!(e.to_string().contains("`clientMaxRetries`"), "{e}");
        Store::from_uri_with(
            "s3://bucket",
            &[
                ("accessKeyId".into(), "k".into()),
                ("secretAccessKey".into(), "s".into()),
                ("client_max_retries".into(), "2".into()),
                ("clientRetryTimeout".into(), "30".into()),
            ],
        )
        .unwrap();
        // GCS and Azure take their keys in camelCase too.
        Store::from_uri_with(
            "gs://bucket/p",
            &[("serviceAccountKey".into(), "{}".into())],
        )
        .map(|_| ())
        .unwrap_or_else(|e| assert!(!e.to_string().contains("unknown storage option"), "{e}"));
        let s = Store::from_uri_with(
            "az://container/p",
            &[
                ("accountName".into(), "acct".into()),
                ("accessKey".into(), "a2V5".into()),
            ],
        )
        .unwrap();
        assert_eq!(s.root.as_ref(), "p");
    }

    #[tokio::test]
    async fn put_if_absent_creates_once() {
        for store in [Store::memory(), {
            let d = tempfile::tempdir().unwrap().keep();
            Store::local(d).unwrap()
        }] {
            let p = store.shard_paths(Uuid::new_v4()).wal_entry(1);
            assert!(!store.exists(&p).await.unwrap());
            let r = store
                .put_if_absent(&p, Bytes::from_static(b"a"))
                .await
                .unwrap();
            assert_eq!(r, CreateOutcome::Created);
            let r = store
                .put_if_absent(&p, Bytes::from_static(b"b"))
                .await
                .unwrap();
            assert_eq!(r, CreateOutcome::AlreadyExists);
            assert_eq!(store.get(&p).await.unwrap().unwrap().as_ref(), b"a");
            assert!(store.exists(&p).await.unwrap());
        }
    }

    // A lost race for a slot must not cost another data sync: a local store writes the data
    // once and links it at the first free name; other stores try only the first name.
    #[tokio::test]
    async fn put_if_absent_first_free_takes_the_first_free_slot_in_order() {
        let dir = tempfile::tempdir().unwrap();
        for (store, tries_all) in [
            (Store::local(dir.path()).unwrap(), true),
            (Store::memory(), false),
        ] {
            let paths = store.shard_paths(Uuid::new_v4());
            let slots: Vec<Path> = (1..=4).map(|p| paths.wal_entry(p)).collect();
            for p in &slots[..2] {
                store
                    .put_if_absent(p, Bytes::from_static(b"old"))
                    .await
                    .unwrap();
            }
            let staged = store
                .stage(&slots[0], Bytes::from_static(b"new"))
                .await
                .unwrap();
            assert_eq!(
                store.list(&paths.wal_dir()).await.unwrap().len(),
                2,
                "staging names nothing"
            );
            let r = store
                .put_if_absent_first_free(&slots, &staged)
                .await
                .unwrap();
            if tries_all {
                assert_eq!(r, FirstFree::Created(2));
                assert_eq!(
                    store.get(&slots[2]).await.unwrap().unwrap().as_ref(),
                    b"new"
                );
                assert!(!store.exists(&slots[3]).await.unwrap(), "one slot only");
                drop(staged);
                // A staged put that lost every slot is still good for later ones.
                let x = store
                    .stage(&slots[0], Bytes::from_static(b"x"))
                    .await
                    .unwrap();
                let r = store
                    .put_if_absent_first_free(&slots[..3], &x)
                    .await
                    .unwrap();
                assert_eq!(r, FirstFree::Taken(3));
                let r = store
                    .put_if_absent_first_free(&slots[2..], &x)
                    .await
                    .unwrap();
                assert_eq!(r, FirstFree::Created(1));
                assert_eq!(store.get(&slots[3]).await.unwrap().unwrap().as_ref(), b"x");
            } else {
                assert_eq!(r, FirstFree::Taken(1));
                assert!(!store.exists(&slots[2]).await.unwrap());
            }
            for p in &slots[..2] {
                assert_eq!(store.get(p).await.unwrap().unwrap().as_ref(), b"old");
            }
            let listed = store.list(&paths.wal_dir()).await.unwrap();
            assert!(
                listed
                    .iter()
                    .all(|m| m.location.filename().is_some_and(|n| !n.starts_with('.'))),
                "no staging file left behind: {listed:?}"
            );
        }
    }
}
