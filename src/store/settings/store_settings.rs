//! The settings of any store kind, and opening the store and guard they name.

use std::path::Path;
use std::sync::Arc;

use super::error::SettingError;
use super::kind::StoreKind;
use super::source::SettingsSource;
use crate::store::azure::settings::AzureSettings;
use crate::store::gcs::settings::GcsSettings;
use crate::store::guard::WriteGuard;
use crate::store::local::LocalSettings;
use crate::store::open::{Opened, StoreConfig};
use crate::store::record_store::DynStore;
use crate::store::s3::settings::S3Settings;
use crate::store::traced::Traced;

/// Where records are kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreSettings {
    /// A local folder.
    Local(LocalSettings),
    /// An S3 bucket.
    S3(S3Settings),
    /// An Azure Blob Storage container.
    Azure(AzureSettings),
    /// A Google Cloud Storage bucket.
    Gcs(GcsSettings),
}

impl StoreSettings {
    /// The kind.
    pub fn kind(&self) -> StoreKind {
        match self {
            StoreSettings::Local(_) => StoreKind::Local,
            StoreSettings::S3(_) => StoreKind::S3,
            StoreSettings::Azure(_) => StoreKind::Azure,
            StoreSettings::Gcs(_) => StoreKind::Gcs,
        }
    }

    /// The kind's own settings, which build its store and its guard: the one dispatch on the kind.
    pub fn config(&self) -> &dyn StoreConfig {
        match self {
            StoreSettings::Local(local) => local,
            StoreSettings::S3(s3) => s3,
            StoreSettings::Azure(az) => az,
            StoreSettings::Gcs(gcs) => gcs,
        }
    }

    /// Open the store these settings name (a relative local path is taken from `root`), traced.
    pub async fn open_store(&self, root: &Path) -> DynStore {
        Arc::new(Traced::new(self.config().store(root).await))
    }

    /// The guard checked before a run's first write, if the kind has one (none with `skip_bucket_checks`).
    pub fn guard(&self) -> Option<Arc<dyn WriteGuard>> {
        self.config().guard()
    }

    /// Open the store these settings name, traced, together with its write guard.
    pub async fn open(&self, root: &Path) -> Opened {
        Opened {
            store: self.open_store(root).await,
            guard: self.guard(),
        }
    }

    /// Read the settings of a store of `kind` from `source`, with that kind's parser.
    pub fn from_source(
        kind: StoreKind,
        source: &dyn SettingsSource,
    ) -> Result<StoreSettings, SettingError> {
        Ok(match kind {
            StoreKind::Local => StoreSettings::Local(LocalSettings::from_source(source)?),
            StoreKind::S3 => StoreSettings::S3(S3Settings::from_source(source)?),
            StoreKind::Azure => StoreSettings::Azure(AzureSettings::from_source(source)?),
            StoreKind::Gcs => StoreSettings::Gcs(GcsSettings::from_source(source)?),
        })
    }
}

/// Open the record store a root's settings name (relative local paths are taken from `root`), traced.
pub async fn open(settings: &StoreSettings, root: &Path) -> DynStore {
    settings.open_store(root).await
}

/// The guard a store kind's settings ask for, if any (none with `skip_bucket_checks`, or for a local folder).
pub fn guard_for(settings: &StoreSettings) -> Option<Arc<dyn WriteGuard>> {
    settings.guard()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::store::settings::kind::STORE_KINDS;

    /// A source from a map: the simplest source, for the kinds' own tests.
    pub(crate) struct MapSource(pub BTreeMap<&'static str, Value>);

    /// A value in a [`MapSource`].
    pub(crate) enum Value {
        Str(&'static str),
        Bool(bool),
    }

    impl SettingsSource for MapSource {
        fn string(&self, name: &str) -> Result<Option<String>, SettingError> {
            match self.0.get(name) {
                None => Ok(None),
                Some(Value::Str(s)) => Ok(Some(s.to_string())),
                Some(Value::Bool(_)) => Err(SettingError::setting(name, "not a string")),
            }
        }
        fn boolean(&self, name: &str) -> Result<Option<bool>, SettingError> {
            match self.0.get(name) {
                None => Ok(None),
                Some(Value::Bool(b)) => Ok(Some(*b)),
                Some(Value::Str(_)) => Err(SettingError::setting(name, "not a bool")),
            }
        }
        fn names(&self) -> Vec<String> {
            self.0.keys().map(|k| k.to_string()).collect()
        }
    }

    #[test]
    fn kinds_parse_and_unknown_kinds_are_named() {
        for k in STORE_KINDS {
            assert_eq!(StoreKind::parse(k).map(StoreKind::as_str), Ok(*k));
        }
        let e = StoreKind::parse("gopher").unwrap_err();
        assert!(
            e.message
                .contains("\"local\", \"s3\", \"azurerm\", \"gcs\"")
        );
    }

    #[test]
    fn a_setting_the_kind_does_not_take_is_refused_by_name() {
        let src = MapSource(BTreeMap::from([
            ("bucket", Value::Str("b")),
            ("bukket", Value::Str("c")),
        ]));
        let e = StoreSettings::from_source(StoreKind::S3, &src).unwrap_err();
        assert_eq!(e.setting.as_deref(), Some("bukket"));
        assert!(e.message.contains("no setting `bukket`"), "{e}");
        let src = MapSource(BTreeMap::from([
            ("bucket", Value::Str("b")),
            ("skip_bucket_checks", Value::Bool(true)),
        ]));
        match StoreSettings::from_source(StoreKind::S3, &src) {
            Ok(StoreSettings::S3(s3)) => assert!(s3.skip_bucket_checks),
            other => panic!("{other:?}"),
        }
    }
}
