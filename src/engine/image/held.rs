//! What a reader knows of the stored image before it lists.

use std::sync::Arc;

use super::estate_image::Image;

/// What a reader knows of the stored image before it lists.
#[derive(Clone, Debug, Default)]
pub enum Held {
    /// Nothing: the first read fetches the stored image.
    #[default]
    Unknown,
    /// The last look found none stored (or one unusable): the listing shows whether one appeared.
    Absent,
    /// An image: the one stored at its [`Image::stored`] version, or an older one kept locally.
    Image(Arc<Image>),
}

impl Held {
    /// The image, if one is held.
    pub fn image(&self) -> Option<&Arc<Image>> {
        match self {
            Held::Image(i) => Some(i),
            _ => None,
        }
    }
}
