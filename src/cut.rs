//! Test-only switches that cut one mechanism out, so `make prove-claims` can show each claim's test fail without it.
//!
//! Compiled in only with the `mechanism-cut` feature, which refuses to build in release
//! mode. The mechanisms to cut are named in `CHOUDOUFU_CUT` (comma-separated), read once
//! per process; a name that is not a [`Mechanism`] stops the process loudly, so a misspelt
//! cut can never turn "proven" into "passes". Without the feature every call answers
//! `false` and the optimiser removes it.

#[cfg(all(feature = "mechanism-cut", not(debug_assertions)))]
compile_error!(
    "the mechanism-cut feature is for proving claims in tests and cannot be built in release mode"
);

/// The variable naming the mechanisms to cut.
pub const CUT_ENV: &str = "CHOUDOUFU_CUT";

/// One mechanism a claim rests on; `scripts/claims.tsv` names them by [`Mechanism::name`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mechanism {
    /// The store's conditional-write preconditions (`If-None-Match` / `If-Match`).
    Conditions,
    /// The session's diff against its base (unchanged records are not written).
    Diff,
    /// Recognising a run's own retried write by its bytes.
    OwnWrite,
    /// The local store breaking a lock file its dead holder left.
    StaleBreak,
    /// Taking no estate lock (cut: `run` holds a stock-style lock file for the whole run).
    EstateLock,
    /// `force-unlock` answering "no lock" without running terraform.
    NoLock,
    /// Judging a run gone by its heartbeat, so its marks are taken over.
    Takeover,
    /// A mark showing its run alive before the run's first heartbeat writes its run record.
    MarkWindow,
    /// Refusing a change whose dependency is in flight in another live run.
    PendingMarks,
    /// Pinning a saved plan's base for its apply.
    Pin,
    /// Checking a saved plan's stamp before it is applied.
    StampCheck,
    /// The choudoufu protocol's delete rules (program stamps, owning estate).
    DeleteRule,
    /// Default provider records keyed by address and configuration.
    ProviderId,
    /// The estate prefix's trailing slash, which keeps `prod` apart from `prod-eu`.
    EstatePrefix,
    /// The bucket safety check before a run's first write.
    BucketCheck,
    /// The IAM policy's confinement to the estate's prefix and tag.
    PolicyScope,
    /// Plugin mode pinning the host's client certificate.
    ClientPinning,
    /// Listing live objects by their markers.
    Listing,
    /// `records restore` writing on the version it read as current, never retrying on a newer one.
    RestoreCondition,
    /// `run` serving the records as the old backend of `init -migrate-state` away from http.
    MigrateOut,
    /// `run` claiming a plan's changes before terraform applies them.
    Claims,
    /// Skipping a write of a record outside the run's changes that another run moved or holds.
    RefreshSkip,
    /// Reconciling an output that met another run's newer value, instead of a conflict.
    OutputReconcile,
    /// The per-run state server refusing requests without the run's credentials.
    RunCredentials,
    /// Record, temp, lock and cache files made 0600 in folders made 0700.
    PrivateFiles,
    /// Refusing a state document whose lineage is not the estate's.
    LineageCheck,
    /// Naming OpenTofu's encrypted state envelope when refusing it.
    EncryptedState,
    /// The HTTP door's limit on a state document's size.
    BodyLimit,
    /// Reading a refused body's bounded rest before the 413, so the client hears it.
    BodyDrain,
    /// Refusing to start terraform when `.terraform/terraform.tfstate` stores a backend address or credentials.
    StoredBackend,
    /// Validating the live protocol's request fields (addresses, estate) before any store call.
    RequestValidation,
    /// Using an estate image's entry only at the version the listing gives.
    ImageVersion,
    /// Storing the estate image LZ4-compressed (cut: its text is stored as it is).
    ImagePack,
    /// Handing over an S3 answer's bytes as they arrive (cut: the whole answer as one chunk).
    ImageStream,
    /// Listing a short first page of the write log (cut: a full page of 1,000 entries).
    LogFirstPage,
    /// Serving a resource record an image describes without decoding it (cut: every image record is decoded as it is read).
    LazyRecords,
    /// Counting a record of the run's own last read as in the image when the image holds it at that version.
    ImagePrior,
    /// A writer refusing to write when its clock is too far from the store's (the write log's skew check).
    ClockSkew,
    /// A write whose log entry is past the stall limit logging again before the record write.
    LogStall,
    /// Each record write making its write log entry first (cut: the entry is named, never stored).
    LogEntries,
    /// Reading through the image and the write log (cut: every read lists the whole estate).
    LogRead,
    /// Reading through the write log only while the image's watermark is younger than the log's trust.
    LogTrust,
    /// A new image's sweep of the write log entries older than the retention.
    LogSweep,
    /// Listing the write log past its first page, down to the image's watermark (cut: such a read lists the whole estate).
    LogPages,
    /// A new image naming the entries whose write may still land (cut: it names none).
    LogPending,
    /// The S3 lifecycle rule expiring write log entries, and their tag (cut: neither is set).
    LogLifecycle,
    /// `run` writing, after terraform exits, the state whose write failed for a store error.
    Flush,
    /// That write made against the versions the run read (cut: against a fresh read, as `state push` would).
    FlushBase,
    /// Writing a recovery file when the store stays away past `--flush-timeout`.
    RecoveryFile,
    /// `records recover` refusing a recovery file of another estate or store.
    RecoveryEstate,
    /// Counting a refused write as landed when the store holds this run's own record with the same content.
    OwnContent,
    /// Making a store safety check that could not run again before the next write.
    GuardRetry,
    /// A shim running a live root's state commands through `run` (cut: every command passes through untouched).
    ShimRun,
    /// A shim passing a root without `live.hcl` to the real terraform untouched (cut: through `run`).
    ShimPassThrough,
    /// A shim passing commands that never touch state to the real terraform untouched (cut: through `run`).
    ShimStateless,
    /// A shim refusing a real program that is itself, or a shim a shim started (cut: it runs it).
    ShimLoop,
    /// A shim giving `run` the flags its variables set (`CHOUDOUFU_WAIT` as `--wait`).
    ShimRunFlags,
    /// `shim DIR` leaving a file of the shims' names that is not a shim alone (cut: replaced).
    ShimOccupied,
    /// A shim that `choudoufu-live run` started as its terraform passing through (cut: a run inside the run).
    ShimInsideRun,
    /// Giving up a store call early while none of its tries reached the store (cut: its full tries).
    UnreachedBudget,
    /// `run` checking the store once before it starts terraform.
    StorePreflight,
    /// Writing no ANSI colour off a terminal or under `NO_COLOR` / `-no-color`.
    NoColour,
    /// Ending a `records` command quietly when its reader closed the pipe.
    QuietPipe,
    /// Counting `--wait` from the first refused claim (cut: from the run's start).
    WaitFromRefusal,
    /// Deleting a gone run's run record when its claims are taken over.
    GoneRunRecord,
    /// A destroy's closing line in `terraform destroy`'s words.
    DestroyWords,
    /// Comparing records in a canonical form: terraform's order of set-like lists is no change.
    CanonicalCompare,
    /// Telling how to write terraform's errored.tfstate after a refused state write.
    ErroredAdvice,
    /// The provider door checking each package it launches against the lock file's `h1:` hashes.
    ProviderHashCheck,
    /// Using a package's kept `h1:` hash only while each of its files is the same file, unchanged (cut: whenever one is kept).
    KeptHashCheck,
    /// Keeping the state's types in the schema answer the door narrows to what the run names (cut: the configuration's words alone).
    SchemaStateTypes,
    /// The provider door answering a provider configuration's validation from the run's kept answer to the same request.
    KeptValidations,
    /// A saved plan's check reading its own changes' records by key, and terraform's requests of a pinned view answered without a new read (cut: the whole estate read again for each).
    KeyedCheck,
    /// Holding the state requests of an apply started before its plan's changes are claimed until they are (cut: answered at once).
    ApplyGate,
    /// Starting a planned apply's `show -json` beside its plan, held on a FIFO before it reads anything (cut: started once the plan is written).
    ShowAhead,
    /// Releasing, at the run's end, the marks whose clearing failed as their records landed.
    ReleaseUncleared,
    /// `run`'s terraform and provider processes dying with `run` (a parent-death signal).
    ParentDeath,
    /// `run` starting the providers itself behind its provider door (cut: terraform starts them).
    ProviderDoor,
    /// The provider door writing each instance's record when its provider apply call returns.
    ReturnRecords,
    /// The provider door putting the live markers into each create's tags (and `ignore_tags` into the configuration).
    CreateMarkers,
    /// `run` binding the one live object marked for a planned create, instead of creating another.
    MarkerBind,
    /// `markers = false` in the live block turning the door's live markers off (cut: they stay on).
    MarkersOff,
    /// The provider door taking the live markers out of a create's answer before terraform sees it.
    MarkerStrip,
    /// The collision check listing IAM roles once for all of a plan's role creates (cut: once per create).
    IamOnce,
    /// The provider door matching an apply call to its planned change exactly (an unknown is not a null; a call fitting changes that differ takes none).
    ExactMatch,
    /// The marker strip giving back a `tags` that was null as null.
    NullTags,
    /// `run` never binding a marked object a record holds under another address, and putting its marker right.
    BindGuard,
    /// `run` putting right, after each apply, a marker that names another address than the record holding its object.
    ReMark,
    /// `run` binding a marked object whose create never returned as tainted, so the next apply replaces it.
    BindTainted,
    /// `run` asking the provider itself whether a marked object is live and by which import ID (cut: the ARN table's ID, and every listed object taken as live).
    LiveRead,
    /// `run` refusing a `state push` without `-force` of a file not pulled from the state it serves.
    PushGuard,
    /// `run` resuming a stopped saved plan under its approval: its own apply's records known by the plan on their writer, the rest planned again and compared (cut: every moved record refuses, and a new plan is never compared).
    Resume,
    /// The provider door naming a provider plugin that died mid-apply, and the resource whose call was in flight.
    ProviderCrash,
    /// A record store that hangs given up on each attempt's timeout like one that refuses, so a record write at a provider's return holds terraform no longer than the store's policy (cut: each attempt waits out the whole deadline).
    StalledStore,
    /// The provider door answering a cone plan's resource reads from their records (cut: every read goes to the provider).
    ConeReads,
    /// The cone holding the plan's changes, their dependents and dependencies: each change confirmed against the cloud, its dependents read (cut: only records past the maximum age).
    ConeChanges,
    /// The cone holding every record whose last refresh is older than `refresh_max_age` (cut: no record for its age).
    ConeAge,
    /// A `full` refresh sending every read to the provider (cut: a plan makes a cone whatever the mode).
    FullRefresh,
    /// The S3 door refusing a request not signed with the run's secret (cut: unsigned requests are served).
    S3Signature,
    /// `run` refusing an s3 root with the provider door off (cut: it runs, its providers given the door's endpoint).
    S3NeedsDoor,
    /// The S3 door serving each workspace from an estate of its own (cut: every workspace is the default's estate).
    S3Workspaces,
    /// `run` refusing an s3 root whose bucket holds terraform's own state at the key (cut: the records are served as if it were not there).
    S3StockState,
    /// `records import` leaving choudoufu-live's marker at an adopted key (cut: the stock state stays there).
    S3AdoptMarker,
    /// The shim sending a root whose backend is `s3` through `run` (cut: only roots with live.hcl).
    ShimS3,
    /// The record store of an s3 root taking the backend block's `profile` and `assume_role` (cut: the standard chain alone).
    S3BlockCredentials,
    /// The provider door starting the next plugin in the background as each terraform connection takes a warm one (cut: every plugin after the first starts when a connection asks).
    WarmSpares,
    /// The provider door starting for the run's last terraform process only the plugins its plan's provider configurations need, and stopping the idle spare once it ends (cut: one idle spare is kept to the end).
    SpareBudget,
    /// Each terraform connection of the provider door getting a plugin of its own (cut: every connection of a provider shares the first one's plugin).
    OwnPlugin,
    /// The provider door sending the validation calls of a connection that holds no plugin to the idle spare (cut: such a call takes a plugin).
    SpareValidates,
}

impl Mechanism {
    /// Every mechanism, in the order the claims list them.
    pub const ALL: &'static [Mechanism] = &[
        Mechanism::Conditions,
        Mechanism::Diff,
        Mechanism::OwnWrite,
        Mechanism::StaleBreak,
        Mechanism::EstateLock,
        Mechanism::NoLock,
        Mechanism::Takeover,
        Mechanism::MarkWindow,
        Mechanism::PendingMarks,
        Mechanism::Pin,
        Mechanism::StampCheck,
        Mechanism::DeleteRule,
        Mechanism::ProviderId,
        Mechanism::EstatePrefix,
        Mechanism::BucketCheck,
        Mechanism::PolicyScope,
        Mechanism::ClientPinning,
        Mechanism::Listing,
        Mechanism::BodyLimit,
        Mechanism::BodyDrain,
        Mechanism::Claims,
        Mechanism::EncryptedState,
        Mechanism::ImageVersion,
        Mechanism::ImagePrior,
        Mechanism::ImagePack,
        Mechanism::ImageStream,
        Mechanism::LogFirstPage,
        Mechanism::LazyRecords,
        Mechanism::ClockSkew,
        Mechanism::LogStall,
        Mechanism::LogEntries,
        Mechanism::LogRead,
        Mechanism::LogTrust,
        Mechanism::LogSweep,
        Mechanism::LogPages,
        Mechanism::LogPending,
        Mechanism::LogLifecycle,
        Mechanism::LineageCheck,
        Mechanism::MigrateOut,
        Mechanism::OutputReconcile,
        Mechanism::PrivateFiles,
        Mechanism::RefreshSkip,
        Mechanism::RequestValidation,
        Mechanism::RestoreCondition,
        Mechanism::RunCredentials,
        Mechanism::StoredBackend,
        Mechanism::Flush,
        Mechanism::FlushBase,
        Mechanism::RecoveryFile,
        Mechanism::RecoveryEstate,
        Mechanism::OwnContent,
        Mechanism::GuardRetry,
        Mechanism::ShimRun,
        Mechanism::ShimPassThrough,
        Mechanism::ShimStateless,
        Mechanism::ShimLoop,
        Mechanism::ShimRunFlags,
        Mechanism::ShimOccupied,
        Mechanism::ShimInsideRun,
        Mechanism::UnreachedBudget,
        Mechanism::StorePreflight,
        Mechanism::NoColour,
        Mechanism::QuietPipe,
        Mechanism::WaitFromRefusal,
        Mechanism::GoneRunRecord,
        Mechanism::DestroyWords,
        Mechanism::CanonicalCompare,
        Mechanism::ErroredAdvice,
        Mechanism::ProviderHashCheck,
        Mechanism::KeptHashCheck,
        Mechanism::SchemaStateTypes,
        Mechanism::KeptValidations,
        Mechanism::KeyedCheck,
        Mechanism::ApplyGate,
        Mechanism::ShowAhead,
        Mechanism::ReleaseUncleared,
        Mechanism::ParentDeath,
        Mechanism::ProviderDoor,
        Mechanism::ReturnRecords,
        Mechanism::CreateMarkers,
        Mechanism::MarkerBind,
        Mechanism::MarkersOff,
        Mechanism::MarkerStrip,
        Mechanism::IamOnce,
        Mechanism::ExactMatch,
        Mechanism::NullTags,
        Mechanism::BindGuard,
        Mechanism::ReMark,
        Mechanism::BindTainted,
        Mechanism::LiveRead,
        Mechanism::PushGuard,
        Mechanism::Resume,
        Mechanism::ProviderCrash,
        Mechanism::StalledStore,
        Mechanism::ConeReads,
        Mechanism::ConeChanges,
        Mechanism::ConeAge,
        Mechanism::FullRefresh,
        Mechanism::S3Signature,
        Mechanism::S3NeedsDoor,
        Mechanism::S3Workspaces,
        Mechanism::S3StockState,
        Mechanism::S3AdoptMarker,
        Mechanism::ShimS3,
        Mechanism::S3BlockCredentials,
        Mechanism::WarmSpares,
        Mechanism::SpareBudget,
        Mechanism::OwnPlugin,
        Mechanism::SpareValidates,
    ];

    /// The name `CHOUDOUFU_CUT` and `scripts/claims.tsv` use.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Conditions => "conditions",
            Mechanism::Diff => "diff",
            Mechanism::OwnWrite => "own-write",
            Mechanism::StaleBreak => "stale-break",
            Mechanism::EstateLock => "estate-lock",
            Mechanism::NoLock => "no-lock",
            Mechanism::Takeover => "takeover",
            Mechanism::MarkWindow => "mark-window",
            Mechanism::PendingMarks => "pending-marks",
            Mechanism::Pin => "pin",
            Mechanism::StampCheck => "stamp-check",
            Mechanism::DeleteRule => "delete-rule",
            Mechanism::ProviderId => "provider-id",
            Mechanism::EstatePrefix => "estate-prefix",
            Mechanism::BucketCheck => "bucket-check",
            Mechanism::PolicyScope => "policy-scope",
            Mechanism::ClientPinning => "client-pinning",
            Mechanism::Listing => "listing",
            Mechanism::RestoreCondition => "restore-condition",
            Mechanism::MigrateOut => "migrate-out",
            Mechanism::Claims => "claims",
            Mechanism::RefreshSkip => "refresh-skip",
            Mechanism::OutputReconcile => "output-reconcile",
            Mechanism::RunCredentials => "run-credentials",
            Mechanism::PrivateFiles => "private-files",
            Mechanism::LineageCheck => "lineage-check",
            Mechanism::EncryptedState => "encrypted-state",
            Mechanism::BodyLimit => "body-limit",
            Mechanism::BodyDrain => "body-drain",
            Mechanism::StoredBackend => "stored-backend",
            Mechanism::RequestValidation => "request-validation",
            Mechanism::ImageVersion => "image-version",
            Mechanism::ImagePrior => "image-prior",
            Mechanism::ImagePack => "image-pack",
            Mechanism::ImageStream => "image-stream",
            Mechanism::LogFirstPage => "log-first-page",
            Mechanism::LazyRecords => "lazy-records",
            Mechanism::ClockSkew => "clock-skew",
            Mechanism::LogStall => "log-stall",
            Mechanism::LogEntries => "log-entries",
            Mechanism::LogRead => "log-read",
            Mechanism::LogTrust => "log-trust",
            Mechanism::LogSweep => "log-sweep",
            Mechanism::LogPages => "log-pages",
            Mechanism::LogPending => "log-pending",
            Mechanism::LogLifecycle => "log-lifecycle",
            Mechanism::Flush => "flush",
            Mechanism::FlushBase => "flush-base",
            Mechanism::RecoveryFile => "recovery-file",
            Mechanism::RecoveryEstate => "recovery-estate",
            Mechanism::OwnContent => "own-content",
            Mechanism::GuardRetry => "guard-retry",
            Mechanism::ShimRun => "shim-run",
            Mechanism::ShimPassThrough => "shim-pass-through",
            Mechanism::ShimStateless => "shim-stateless",
            Mechanism::ShimLoop => "shim-loop",
            Mechanism::ShimRunFlags => "shim-run-flags",
            Mechanism::ShimOccupied => "shim-occupied",
            Mechanism::ShimInsideRun => "shim-inside-run",
            Mechanism::UnreachedBudget => "unreached-budget",
            Mechanism::StorePreflight => "store-preflight",
            Mechanism::NoColour => "no-colour",
            Mechanism::QuietPipe => "quiet-pipe",
            Mechanism::WaitFromRefusal => "wait-from-refusal",
            Mechanism::GoneRunRecord => "gone-run-record",
            Mechanism::DestroyWords => "destroy-words",
            Mechanism::CanonicalCompare => "canonical-compare",
            Mechanism::ErroredAdvice => "errored-advice",
            Mechanism::ProviderHashCheck => "provider-hash-check",
            Mechanism::KeptHashCheck => "kept-hash-check",
            Mechanism::SchemaStateTypes => "schema-state-types",
            Mechanism::KeptValidations => "kept-validations",
            Mechanism::KeyedCheck => "keyed-check",
            Mechanism::ApplyGate => "apply-gate",
            Mechanism::ShowAhead => "show-ahead",
            Mechanism::ReleaseUncleared => "release-uncleared",
            Mechanism::ParentDeath => "parent-death",
            Mechanism::ProviderDoor => "provider-door",
            Mechanism::ReturnRecords => "return-records",
            Mechanism::CreateMarkers => "create-markers",
            Mechanism::MarkerBind => "marker-bind",
            Mechanism::MarkersOff => "markers-off",
            Mechanism::MarkerStrip => "marker-strip",
            Mechanism::IamOnce => "iam-once",
            Mechanism::ExactMatch => "exact-match",
            Mechanism::NullTags => "null-tags",
            Mechanism::BindGuard => "bind-guard",
            Mechanism::ReMark => "re-mark",
            Mechanism::BindTainted => "bind-tainted",
            Mechanism::LiveRead => "live-read",
            Mechanism::PushGuard => "push-guard",
            Mechanism::Resume => "resume",
            Mechanism::ProviderCrash => "provider-crash",
            Mechanism::StalledStore => "stalled-store",
            Mechanism::ConeReads => "cone-reads",
            Mechanism::ConeChanges => "cone-changes",
            Mechanism::ConeAge => "cone-age",
            Mechanism::FullRefresh => "full-refresh",
            Mechanism::S3Signature => "signed-door",
            Mechanism::S3NeedsDoor => "door-off-refused",
            Mechanism::S3Workspaces => "workspace-estates",
            Mechanism::S3StockState => "stock-state-refusal",
            Mechanism::S3AdoptMarker => "adopt-marker",
            Mechanism::ShimS3 => "shim-bucket-backend",
            Mechanism::S3BlockCredentials => "block-credentials",
            Mechanism::WarmSpares => "warm-spares",
            Mechanism::SpareBudget => "spare-budget",
            Mechanism::OwnPlugin => "own-plugin",
            Mechanism::SpareValidates => "spare-validates",
        }
    }

    /// The mechanism a name names, if any.
    pub fn parse(name: &str) -> Option<Mechanism> {
        Mechanism::ALL.iter().copied().find(|m| m.name() == name)
    }
}

/// The mechanisms a comma-separated list names, or the first name that is none.
pub fn parse_list(list: &str) -> Result<Vec<Mechanism>, String> {
    list.split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(|n| Mechanism::parse(n).ok_or_else(|| n.to_string()))
        .collect()
}

/// Whether `mechanism` is cut out in this (test) build.
#[inline]
pub fn cut(mechanism: Mechanism) -> bool {
    #[cfg(feature = "mechanism-cut")]
    {
        cut_list().contains(&mechanism)
    }
    #[cfg(not(feature = "mechanism-cut"))]
    {
        let _ = mechanism;
        false
    }
}

#[cfg(feature = "mechanism-cut")]
fn cut_list() -> &'static [Mechanism] {
    static LIST: std::sync::OnceLock<Vec<Mechanism>> = std::sync::OnceLock::new();
    LIST.get_or_init(|| {
        let list = std::env::var(CUT_ENV).unwrap_or_default();
        match parse_list(&list) {
            Ok(list) => list,
            Err(unknown) => {
                let known: Vec<&str> = Mechanism::ALL.iter().map(|m| m.name()).collect();
                eprintln!(
                    "{CUT_ENV}={list}: {unknown:?} is no mechanism; the mechanisms are {}",
                    known.join(", ")
                );
                std::process::exit(97);
            }
        }
    })
}

/// With [`Mechanism::EstateLock`] cut, a stock-style lock file held for a whole run (a killed run leaves it).
#[derive(Debug)]
pub struct StockLock(std::path::PathBuf);

impl StockLock {
    /// Wait up to a minute for the estate's stock-style lock file, when the estate-lock mechanism is cut.
    pub async fn hold_if_cut(estate: &str) -> Result<Option<StockLock>, std::io::Error> {
        if !cut(Mechanism::EstateLock) {
            return Ok(None);
        }
        let path = std::env::temp_dir().join(format!("choudoufu-cut-estate-lock-{estate}"));
        let started = std::time::Instant::now();
        loop {
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(_) => return Ok(Some(StockLock(path))),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    if started.elapsed() > std::time::Duration::from_secs(60) {
                        return Err(std::io::Error::other(format!(
                            "Error acquiring the state lock: {} is held",
                            path.display()
                        )));
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

impl Drop for StockLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        for m in Mechanism::ALL {
            assert_eq!(Mechanism::parse(m.name()), Some(*m));
        }
        assert_eq!(
            parse_list(" diff, own-write ,"),
            Ok(vec![Mechanism::Diff, Mechanism::OwnWrite])
        );
        assert_eq!(parse_list("diff,own_write"), Err("own_write".to_string()));
    }

    #[test]
    fn every_claim_names_a_mechanism() {
        let tsv = include_str!("../scripts/claims.tsv");
        for line in tsv
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        {
            // A claim two guards give names both, `a,b` (the list CHOUDOUFU_CUT takes).
            let mech = line.rsplit('\t').next().unwrap_or_default();
            assert!(
                !mech.is_empty() && parse_list(mech).is_ok(),
                "scripts/claims.tsv names {mech:?}, which is no Mechanism"
            );
        }
    }
}
