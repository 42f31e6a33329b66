//! Object stores off the local disk (`s3://`, `gs://`, `az://`), through `object_store`'s
//! backends.
//!
//! The three backends differ only in data: which builder, which schemes, which option keys hold
//! credentials and what to tell a user who set none. So each is one row of [`BACKENDS`], and one
//! function, `CloudBuilder::open`, applies every row; a new backend is a new row (and a cargo
//! feature), not a copy of the code.
//!
//! # Options
//! Options are `object_store` configuration keys (`allow_http`), or the same in camelCase
//! (`allowHttp`), as the JavaScript API passes them. They override the environment (each
//! builder starts `from_env`).
//!
//! memwal adds three options of its own: `instance_credentials` (below), and, as in Lance,
//! `client_max_retries` and `client_retry_timeout` (seconds): how often and how long the
//! client retries one request (503, 500, a reset connection) before memwal sees the error.
//!
//! # Time budgets
//! A store that accepts connections and never answers must fail in about a minute, not in six:
//! with `object_store`'s defaults, an open whose two reads each spent the client's 180 s retry
//! budget took six minutes to fail. So memwal sets its own defaults, each overridable by the
//! storage option named:
//! - `connect_timeout`: 5 s to connect ([`DEFAULT_CONNECT_TIMEOUT`]);
//! - `timeout`: 30 s for one request, connect to last byte ([`DEFAULT_REQUEST_TIMEOUT`]);
//! - `client_retry_timeout`: 60 s (not object_store's 180 s) after which the client stops
//!   retrying one request ([`DEFAULT_RETRY_TIMEOUT`]). A request that fails after it began
//!   is not cut short, so one call ends at most one request timeout after the budget.
//!
//! A best-effort read or write (the manifest's version hint) has a shorter budget of its own
//! (`Store`'s best-effort budget, set here): a store that does not answer it costs seconds,
//! then memwal goes on without it. A timeout is reported as `Error::Timeout`, never as a
//! refusal.
//! # Credentials
//! Every backend falls back to the cloud's instance metadata service (a link-local address)
//! when no credentials are configured. memwal does not let that happen silently: a location
//! with no credential source fails at once with an error saying what to set, unless the
//! caller opts in with the memwal option `instance_credentials` (`instanceCredentials`). So a
//! misconfigured process fails fast instead of timing out against an address that is not
//! there, and tests never reach beyond the machine.

// Without any cloud feature the rows are all `None`: the builder machinery is left out (it
// needs object_store's cloud code) and what remains goes unused.
#![cfg_attr(
    not(any(feature = "s3", feature = "gcs", feature = "azure")),
    allow(dead_code)
)]

#[cfg(any(feature = "s3", feature = "gcs", feature = "azure"))]
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStore;
#[cfg(any(feature = "s3", feature = "gcs", feature = "azure"))]
use object_store::RetryConfig;
use object_store::path::Path;

#[cfg(feature = "s3")]
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey as S3Key};
#[cfg(feature = "azure")]
use object_store::azure::{AzureConfigKey as AzureKey, MicrosoftAzureBuilder};
#[cfg(feature = "gcs")]
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey as GcsKey};

use crate::error::{Error, Result};
use crate::redact::redact_secrets;

/// memwal's own option: use the instance's (or pod's) credentials from the metadata service.
const INSTANCE_CREDENTIALS: &str = "instance_credentials";
/// memwal's own option (as in Lance): retries of one request inside the object store
/// client (default 10), before memwal's own WAL retries (`max_wal_persist_retries`).
const CLIENT_MAX_RETRIES: &str = "client_max_retries";
/// memwal's own option (as in Lance): seconds after which the client stops retrying one
/// request (default [`DEFAULT_RETRY_TIMEOUT`]).
const CLIENT_RETRY_TIMEOUT: &str = "client_retry_timeout";

/// Default time to establish a connection (storage option `connect_timeout`).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Default time for one request, from connecting to the last byte (storage option `timeout`).
/// Long enough for a 64 MiB generation file at ~3 MB/s.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Default time after which the client stops retrying one request (storage option
/// `client_retry_timeout`, in seconds): two request timeouts, where object_store's own
/// default, 180 s, let one silent read cost three minutes.
pub const DEFAULT_RETRY_TIMEOUT: Duration = Duration::from_secs(60);
/// Budget of a best-effort request (the manifest's version hint): short, because going on
/// without it is always correct, and a silent store must not cost a retry budget twice.
pub const BEST_EFFORT_BUDGET: Duration = Duration::from_secs(2);

/// One row per backend. A row whose cargo feature is off keeps its schemes, so that such a
/// location is refused with the reason instead of being taken for an unknown scheme.
const BACKENDS: &[Row] = &[
    Row {
        schemes: &["s3", "s3a"],
        #[cfg(feature = "s3")]
        backend: Some(&CloudBuilder::<AmazonS3Builder> {
            known_options: "region, endpoint, allowHttp, accessKeyId, secretAccessKey, sessionToken, virtualHostedStyleRequest",
            credential_keys: &[
                S3Key::AccessKeyId,
                S3Key::WebIdentityTokenFile,
                S3Key::ContainerCredentialsRelativeUri,
                S3Key::ContainerCredentialsFullUri,
                S3Key::SkipSignature,
                S3Key::MetadataEndpoint,
            ],
            credentials_elsewhere: || false,
            how_to_set_credentials: "pass the storage options accessKeyId and secretAccessKey (and sessionToken for temporary credentials), or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_WEB_IDENTITY_TOKEN_FILE or AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        }),
        #[cfg(not(feature = "s3"))]
        backend: None,
    },
    Row {
        schemes: &["gs"],
        #[cfg(feature = "gcs")]
        backend: Some(&CloudBuilder::<GoogleCloudStorageBuilder> {
            known_options: "serviceAccount (a key file path), serviceAccountKey (the key as JSON), applicationCredentials",
            credential_keys: &[
                GcsKey::ServiceAccount,
                GcsKey::ServiceAccountKey,
                GcsKey::ApplicationCredentials,
                GcsKey::SkipSignature,
            ],
            credentials_elsewhere: gcloud_default_credentials_exist,
            how_to_set_credentials: "pass the storage option serviceAccount (a key file path) or serviceAccountKey (the key as JSON), set GOOGLE_SERVICE_ACCOUNT or GOOGLE_APPLICATION_CREDENTIALS, or run `gcloud auth application-default login`",
        }),
        #[cfg(not(feature = "gcs"))]
        backend: None,
    },
    Row {
        schemes: &["az", "azure", "abfs", "abfss"],
        #[cfg(feature = "azure")]
        backend: Some(&CloudBuilder::<MicrosoftAzureBuilder> {
            known_options: "accountName, accessKey, sasKey, clientId, clientSecret, tenantId, endpoint",
            credential_keys: &[
                AzureKey::AccessKey,
                AzureKey::SasKey,
                AzureKey::Token,
                AzureKey::ClientSecret,
                AzureKey::FederatedTokenFile,
                AzureKey::UseAzureCli,
                AzureKey::UseEmulator,
                AzureKey::SkipSignature,
                AzureKey::MsiEndpoint,
            ],
            credentials_elsewhere: || false,
            how_to_set_credentials: "pass the storage options accountName and accessKey (or sasKey, or clientId, clientSecret and tenantId), or set AZURE_STORAGE_ACCOUNT_NAME and AZURE_STORAGE_ACCOUNT_KEY",
        }),
        #[cfg(not(feature = "azure"))]
        backend: None,
    },
];

/// A row of [`BACKENDS`].
struct Row {
    /// The URI schemes the backend serves.
    schemes: &'static [&'static str],
    /// How to open a location on it; `None` when memwal is built without its feature.
    backend: Option<&'static dyn Open>,
}

/// Whether `scheme` names a cloud backend (built in or not): such a location goes to [`open`].
pub(super) fn is_cloud_scheme(scheme: &str) -> bool {
    BACKENDS.iter().any(|row| row.schemes.contains(&scheme))
}

/// A cloud location, opened: what `Store::from_uri_with` builds a store on.
pub(super) struct Opened {
    /// The bucket's object store, with memwal's client settings.
    pub object_store: Arc<dyn ObjectStore>,
    /// The prefix the location names inside the bucket.
    pub root: Path,
    /// `scheme://bucket`, without credentials: what object paths are appended to for other
    /// tools.
    pub base: String,
}

/// `scheme://bucket/prefix` with `options` (object_store configuration keys).
pub(super) fn open(scheme: &str, uri: &str, options: &[(String, String)]) -> Result<Opened> {
    let (location, root) = Location::parse(scheme, uri, options)?;
    let backend = BACKENDS
        .iter()
        .find(|row| row.schemes.contains(&scheme))
        .and_then(|row| row.backend)
        .ok_or_else(|| {
            Error::invalid(format!(
                "`{scheme}://` locations need memwal built with that object store's feature"
            ))
        })?;
    Ok(Opened {
        object_store: backend.open(&location)?,
        root,
        base: format!("{scheme}://{}", location.host),
    })
}

/// A cloud location with memwal's own options taken out of its options: what every
/// backend's builder is given.
struct Location<'a> {
    scheme: &'a str,
    uri: &'a str,
    /// `uri` as messages show it: without credentials.
    shown: String,
    /// The bucket (or container, or `container@account` for `abfs://`) the URI names, without
    /// credentials.
    host: String,
    /// `client_max_retries`, if given.
    max_retries: Option<usize>,
    /// `client_retry_timeout`, if given.
    retry_timeout: Option<Duration>,
    instance_credentials: bool,
    /// The other options, for the builder: (key as given, object_store key, value).
    config: Vec<(&'a str, String, &'a str)>,
}

impl<'a> Location<'a> {
    /// The location and its root prefix, or an error for a malformed URI or one of memwal's
    /// own options with a bad value.
    fn parse(
        scheme: &'a str,
        uri: &'a str,
        options: &'a [(String, String)],
    ) -> Result<(Self, Path)> {
        let shown = redact_secrets(uri).into_owned();
        let url = url::Url::parse(uri)
            .map_err(|e| Error::invalid(format!("location {shown} is not a valid URI: {e}")))?;
        let root = Path::from_url_path(url.path()).map_err(|e| {
            Error::invalid(redact_secrets(&format!(
                "location {shown} has an invalid path: {e}"
            )))
        })?;
        let mut location = Location {
            scheme,
            uri,
            shown,
            host: authority(&url),
            max_retries: None,
            retry_timeout: None,
            instance_credentials: false,
            config: Vec::with_capacity(options.len()),
        };
        for (key, value) in options {
            let snake = option_key(key);
            if snake == CLIENT_MAX_RETRIES {
                location.max_retries = Some(parse_uint(key, value)? as usize);
            } else if snake == CLIENT_RETRY_TIMEOUT {
                location.retry_timeout = Some(Duration::from_secs(parse_uint(key, value)?));
            } else if snake == INSTANCE_CREDENTIALS {
                location.instance_credentials = match value.as_str() {
                    "true" => true,
                    "false" => false,
                    other => {
                        return Err(Error::invalid(format!(
                            "invalid storage option `{key}`: expected true or false, got {other:?}"
                        )));
                    }
                };
            } else {
                location.config.push((key.as_str(), snake, value.as_str()));
            }
        }
        Ok((location, root))
    }

    /// The client's retries: `object_store`'s defaults with memwal's retry budget, changed by
    /// memwal's options.
    #[cfg(any(feature = "s3", feature = "gcs", feature = "azure"))]
    fn retry(&self) -> RetryConfig {
        let mut retry = RetryConfig {
            retry_timeout: DEFAULT_RETRY_TIMEOUT,
            ..RetryConfig::default()
        };
        if let Some(n) = self.max_retries {
            retry.max_retries = n;
        }
        if let Some(timeout) = self.retry_timeout {
            retry.retry_timeout = timeout;
        }
        retry
    }

    /// The client timeouts memwal sets unless the options set them (`connect_timeout`,
    /// `timeout`), as (object_store key, value). Set explicitly rather than left to
    /// object_store's defaults, so that they stay what memwal documents.
    fn default_timeouts(&self) -> Vec<(&'static str, String)> {
        [
            ("connect_timeout", DEFAULT_CONNECT_TIMEOUT),
            ("timeout", DEFAULT_REQUEST_TIMEOUT),
        ]
        .into_iter()
        .filter(|(key, _)| !self.config.iter().any(|(_, snake, _)| snake == key))
        .map(|(key, d)| (key, format!("{}ms", d.as_millis())))
        .collect()
    }
}

/// A backend's builder type and what memwal knows about it: the data of one row. (Not a
/// [`super::Backend`]: it only builds the `object_store` that `ObjectBackend` then wraps.)
#[cfg(any(feature = "s3", feature = "gcs", feature = "azure"))]
struct CloudBuilder<B: Builder> {
    /// Options named in the error for an unknown one (every other `object_store` key of the
    /// backend works too).
    known_options: &'static str,
    /// Keys whose presence, in the options or the environment, is a credential source other
    /// than the metadata service.
    credential_keys: &'static [B::Key],
    /// A credential source outside the builder's keys (gcloud's default credentials file).
    credentials_elsewhere: fn() -> bool,
    /// What to set, in the error for a location without credentials.
    how_to_set_credentials: &'static str,
}

/// Opening a location on a row's backend, whatever its builder type, so that the rows of
/// different builders fit one table.
trait Open {
    /// The object store at `location`, or an error saying which option is wrong or which
    /// credentials to set.
    fn open(&self, location: &Location<'_>) -> Result<Arc<dyn ObjectStore>>;
}

#[cfg(any(feature = "s3", feature = "gcs", feature = "azure"))]
impl<B: Builder> Open for CloudBuilder<B> {
    fn open(&self, location: &Location<'_>) -> Result<Arc<dyn ObjectStore>> {
        let Location {
            scheme, uri, shown, ..
        } = location;
        let mut builder = B::from_env().with_url(uri).with_retry(location.retry());
        for (key, value) in location.default_timeouts() {
            let k = key.parse::<B::Key>().map_err(|_| {
                Error::invalid(format!(
                    "{scheme}:// locations do not take the client option `{key}`"
                ))
            })?;
            builder = builder.with_config(k, &value);
        }
        for (key, snake, value) in &location.config {
            let k = snake.parse::<B::Key>().map_err(|_| {
                let also = if snake != key {
                    format!(" (object_store key `{snake}`)")
                } else {
                    String::new()
                };
                Error::invalid(format!(
                    "unknown storage option `{key}`{also} for {scheme}:// locations; known options include {}, and every other object_store configuration key of that store",
                    self.known_options
                ))
            })?;
            builder = builder.with_config(k, value);
        }
        let has_credentials = self
            .credential_keys
            .iter()
            .any(|k| is_set(builder.get_config_value(k)))
            || (self.credentials_elsewhere)();
        if !has_credentials && !location.instance_credentials {
            return Err(Error::invalid(format!(
                "no credentials for {shown}: {}. To use the credentials of the machine's role from the cloud's metadata service instead (EC2 instance profile, GCE service account, Azure managed identity), pass the storage option instanceCredentials: true",
                self.how_to_set_credentials
            )));
        }
        // object_store's own message may quote the URI it was given.
        builder.build().map_err(|e| {
            Error::invalid(redact_secrets(&format!(
                "cannot configure the object store for {shown}: {e}"
            )))
        })
    }
}

/// What memwal calls on an `object_store` builder. The cloud builders have these methods
/// under the same names but share no trait, so [`builder!`] forwards to them.
#[cfg(any(feature = "s3", feature = "gcs", feature = "azure"))]
trait Builder: Sized + 'static {
    /// The builder's configuration key type.
    type Key: FromStr + 'static;
    fn from_env() -> Self;
    fn with_url(self, url: &str) -> Self;
    fn with_retry(self, retry: RetryConfig) -> Self;
    fn with_config(self, key: Self::Key, value: &str) -> Self;
    fn get_config_value(&self, key: &Self::Key) -> Option<String>;
    fn build(self) -> object_store::Result<Arc<dyn ObjectStore>>;
}

/// Implements [`Builder`] for an `object_store` builder and its key type by forwarding to
/// the builder's inherent methods of the same names.
#[cfg(any(feature = "s3", feature = "gcs", feature = "azure"))]
macro_rules! builder {
    ($builder:ty, $key:ty) => {
        impl Builder for $builder {
            type Key = $key;
            fn from_env() -> Self {
                <$builder>::from_env()
            }
            fn with_url(self, url: &str) -> Self {
                <$builder>::with_url(self, url)
            }
            fn with_retry(self, retry: RetryConfig) -> Self {
                <$builder>::with_retry(self, retry)
            }
            fn with_config(self, key: $key, value: &str) -> Self {
                <$builder>::with_config(self, key, value)
            }
            fn get_config_value(&self, key: &$key) -> Option<String> {
                <$builder>::get_config_value(self, key)
            }
            fn build(self) -> object_store::Result<Arc<dyn ObjectStore>> {
                <$builder>::build(self).map(|s| Arc::new(s) as _)
            }
        }
    };
}

#[cfg(feature = "s3")]
builder!(AmazonS3Builder, S3Key);
#[cfg(feature = "gcs")]
builder!(GoogleCloudStorageBuilder, GcsKey);
#[cfg(feature = "azure")]
builder!(MicrosoftAzureBuilder, AzureKey);

fn parse_uint(key: &str, value: &str) -> Result<u64> {
    value.parse::<u64>().map_err(|_| {
        Error::invalid(format!(
            "invalid storage option `{key}`: expected a non-negative integer, got {value:?}"
        ))
    })
}

/// `allowHttp` → `allow_http`; snake_case keys are unchanged.
fn option_key(key: &str) -> String {
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

/// Whether a credential key holds a value: set, not empty and not `false` (a flag switched
/// off).
fn is_set(v: Option<String>) -> bool {
    v.is_some_and(|v| !v.is_empty() && v != "false")
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

/// The authority of `url` as another tool needs it to find an object: the host, with the
/// user name only where it names the container (`abfss://container@account…`), never a
/// password (`abfss://KEY:SECRET@…`: then the user name is a credential too). Any other
/// scheme names its bucket by the host, so a user name there (`s3://KEY@bucket`) can only be
/// a credential.
fn authority(url: &url::Url) -> String {
    let host = url.host_str().unwrap_or_default();
    let names_container = matches!(url.scheme(), "abfs" | "abfss");
    match (url.username(), url.password()) {
        (user, None) if names_container && !user.is_empty() => format!("{user}@{host}"),
        _ => host.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    #[test]
    fn object_uris_name_the_bucket_and_never_credentials() {
        for (uri, expected) in [
            ("s3://bucket/pre/fix", "s3://bucket/pre/fix/_mem_wal/x"),
            (
                "s3://KEY:SECRET@bucket/pre/fix",
                "s3://bucket/pre/fix/_mem_wal/x",
            ),
            ("s3://KEY@bucket/pre/fix", "s3://bucket/pre/fix/_mem_wal/x"),
            ("gs://bucket/pre/fix", "gs://bucket/pre/fix/_mem_wal/x"),
            (
                "abfss://KEY:SECRET@box/pre/fix",
                "abfss://box/pre/fix/_mem_wal/x",
            ),
            (
                "abfss://box@acct.dfs.core.windows.net/pre/fix",
                "abfss://box@acct.dfs.core.windows.net/pre/fix/_mem_wal/x",
            ),
        ] {
            let url = url::Url::parse(uri).unwrap();
            let base = format!("{}://{}", url.scheme(), authority(&url));
            let mut store = Store::memory();
            store.set_object_base(base);
            assert_eq!(
                store.uri_of(&Path::from("pre/fix/_mem_wal/x")),
                expected,
                "{uri}"
            );
        }
    }

    #[test]
    fn every_cloud_scheme_has_exactly_one_row() {
        let mut schemes: Vec<&str> = BACKENDS
            .iter()
            .flat_map(|row| row.schemes.iter().copied())
            .collect();
        let rows = schemes.len();
        schemes.sort_unstable();
        schemes.dedup();
        assert_eq!(schemes.len(), rows, "a scheme in two rows: {schemes:?}");
        for scheme in ["s3", "s3a", "gs", "az", "azure", "abfs", "abfss"] {
            assert!(is_cloud_scheme(scheme), "{scheme}");
        }
        for scheme in ["file", "memory", "http", "S3"] {
            assert!(!is_cloud_scheme(scheme), "{scheme}");
        }
    }

    #[test]
    fn client_retry_options_change_only_what_they_name() {
        let options = [("clientMaxRetries".to_string(), "2".to_string())];
        let (location, root) = Location::parse("s3", "s3://bucket/p", &options).unwrap();
        assert_eq!(root.as_ref(), "p");
        assert!(
            location.config.is_empty(),
            "memwal's own options are taken out"
        );
        let retry = location.retry();
        assert_eq!(retry.max_retries, 2);
        assert_eq!(retry.retry_timeout, DEFAULT_RETRY_TIMEOUT);
        let options = [("client_retry_timeout".to_string(), "30".to_string())];
        let (location, _) = Location::parse("s3", "s3://bucket", &options).unwrap();
        let retry = location.retry();
        assert_eq!(retry.retry_timeout, Duration::from_secs(30));
        assert_eq!(retry.max_retries, RetryConfig::default().max_retries);
    }

    // With object_store's own 180 s retry budget, one read of a silent store cost three minutes.
    #[test]
    fn time_budgets_default_to_memwals_and_options_override_them() {
        let (location, _) = Location::parse("s3", "s3://bucket", &[]).unwrap();
        assert_eq!(location.retry().retry_timeout, Duration::from_secs(60));
        assert_eq!(
            location.default_timeouts(),
            vec![
                ("connect_timeout", "5000ms".to_string()),
                ("timeout", "30000ms".to_string()),
            ]
        );
        let options = [
            ("timeout".to_string(), "2s".to_string()),
            ("connectTimeout".to_string(), "1s".to_string()),
        ];
        let (location, _) = Location::parse("s3", "s3://bucket", &options).unwrap();
        assert!(location.default_timeouts().is_empty(), "options win");
        // Each backend takes both keys, so the defaults build.
        for (uri, creds) in [
            ("s3://bucket", ("access_key_id", "k")),
            ("gs://bucket", ("service_account_key", "{}")),
            ("az://container", ("access_key", "a2V5")),
        ] {
            let mut opts = vec![(creds.0.to_string(), creds.1.to_string())];
            if uri.starts_with("az") {
                opts.push(("account_name".into(), "acct".into()));
            }
            if let Err(e) = Store::from_uri_with(uri, &opts) {
                assert!(!e.to_string().contains("client option"), "{uri}: {e}");
            }
        }
        let s = Store::from_uri_with(
            "s3://bucket",
            &[
                ("access_key_id".into(), "k".into()),
                ("secret_access_key".into(), "s".into()),
            ],
        )
        .unwrap();
        assert_eq!(s.best_effort_budget, Some(BEST_EFFORT_BUDGET));
        assert!(
            Store::memory().best_effort_budget.is_none(),
            "local and in-memory stores have no budget of their own"
        );
    }

    /// `Store::location` is shown (errors, logs, `ObjectStore.location`, the CLI), so it never
    /// holds what the location's credentials were; nor does an error about the location.
    #[test]
    fn locations_and_their_errors_never_show_credentials() {
        const PLANTED: &str = "PLANTED-secret-7";
        let creds = [
            ("access_key_id".to_string(), "k".to_string()),
            ("secret_access_key".to_string(), "s".to_string()),
        ];
        let uri = format!("s3://AKIA:{PLANTED}@bucket/p?sig={PLANTED}");
        let s = Store::from_uri_with(&uri, &creds).unwrap();
        assert_eq!(s.location(), "s3://***@bucket/p?sig=***");
        assert!(!format!("{s:?}").contains(PLANTED));
        assert_eq!(
            s.uri_of(&Path::from("p/_mem_wal/x")),
            "s3://bucket/p/_mem_wal/x"
        );
        let failures = [
            Store::from_uri_with(&uri, &[]),
            Store::from_uri_with(&uri, &[("no_such_key".into(), "1".into())]),
            Store::from_uri_with(&format!("s3://AKIA:{PLANTED}@/?token={PLANTED}"), &creds),
            Store::from_uri_with(&format!("memory://x?sig={PLANTED}"), &creds),
            Store::from_uri_with(&format!("ftp://u:{PLANTED}@host/p"), &[]),
            Store::from_uri_with(&format!("file://u:{PLANTED}@host/p"), &[]),
        ];
        for result in failures {
            let e = result.unwrap_err();
            assert!(!e.to_string().contains(PLANTED), "{e}");
        }
        let local = Store::from_uri(&format!("memory://m?token={PLANTED}")).unwrap();
        assert_eq!(local.location(), "memory://m?token=***");
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
        assert_eq!(option_key("allowHttp"), "allow_http");
        assert_eq!(option_key("accessKeyId"), "access_key_id");
        assert_eq!(option_key("allow_http"), "allow_http");
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
}
