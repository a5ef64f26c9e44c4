//! The estate image: one object under the estate's prefix holding every state record's bytes
//! with the version each had. A cache, never the truth: an entry is used only when its
//! version equals the one the listing gives, and an image that is corrupt or not this
//! estate's is ignored with a warning.
//!
//! Format (`choudoufu-live/image/v2`), written by [`Image::encode`]:
//!
//! ```text
//! choudoufu-live/image/v2\n
//! {"estate":"prod","run_id":"…","written_at":"…","entries":N,"body_crc32":C}\n
//! then N entries, in key order, each:
//! {"key":"tofu-records/prod/r/…","version":{"token":"…"},"digest":"…","rank":[1,0,"",""],"res":[[s,e],…],"bytes":LEN}\n<LEN record bytes>\n
//! ```
//!
//! `body_crc32` (CRC-32 of everything after the header line) refuses a truncated or damaged
//! image whole. Record bytes are in final form (as `Record::encode` writes them, so each
//! instance's text is what the served document holds and is copied there unparsed), `rank`
//! is where a resource's instance sorts among its resource's instances, and `digest` is the
//! record's content digest, so an entry used needs no second digest. `res`, on a resource
//! record's head, is its summary ([`Summary`](crate::engine::record::Summary)): where its texts and instance lie in its bytes,
//! so a read serves it without decoding it. An image of another
//! format (v1 held SHA-256 and record bytes as stored) is ignored with a warning.
//!
//! Stored (`choudoufu-live/image/v4-lz4`, `pack.rs`), the same text is LZ4-compressed in blocks
//! behind a line of their own, each with a CRC-32 (which covers the text, so a packed text's
//! `body_crc32` is not checked again). The root's copy keeps the text itself; a stored text and
//! an image in one block (`v3-lz4`, older writers') still read. The text is read by `text.rs`,
//! each entry head by `head.rs`.
//!
//! By what they hold: `entry` the values an image hands out, `estate_image` the decoded image,
//! `encode` writing one, `held` what a reader knows of the stored one, `plan` the listing
//! splits and the staleness bound it informs, `local` the root's copy.

mod encode;
mod entry;
mod estate_image;
mod head;
mod held;
mod local;
mod pack;
mod plan;
mod text;

pub use entry::{Described, ImageEntry, LogMark};
pub use estate_image::Image;
pub use held::Held;
pub use local::{load_local, local_may_hold_image, save_local};
pub use pack::{STORED_FORMAT, STORED_FORMAT_V3};
pub use plan::{
    RANGE_KEYS, REFRESH_MIN, REFRESH_PERCENT, RangePlan, plan_ranges, plan_resources_after,
    refresh_bound,
};
pub use text::{IMAGE_FORMAT, ImageError, MAX_IMAGE_BYTES};

#[cfg(test)]
mod tests;
