//! The rest of a request body a door refused: read and thrown away, within bounds, so that the
//! client, still writing, is not cut off before it hears why.

use std::time::Duration;

use futures::{Stream, StreamExt};

use crate::cut::{Mechanism, cut};

/// How long a refused body's rest may take to arrive, chunk by chunk, before it is given up.
pub const DISCARD_IDLE: Duration = Duration::from_secs(5);

/// Whether a refused body that declares `declared` bytes against `limit` is read to its end before
/// the answer: when it is under twice the limit (one beyond that is answered unread).
pub fn worth_draining(declared: u64, limit: usize) -> bool {
    declared <= drain_cap(limit)
}

/// The most bytes of a body over `limit` that are read, in all, before it is answered.
pub fn drain_cap(limit: usize) -> u64 {
    (limit as u64).saturating_mul(2)
}

/// Read and throw away up to `cap` more bytes of a refused body: until it ends, stalls for
/// [`DISCARD_IDLE`], fails (it is refused already; its error adds nothing), or passes the cap.
pub async fn discard<S, B, E>(stream: &mut S, cap: u64)
where
    S: Stream<Item = Result<B, E>> + Unpin,
    B: AsRef<[u8]>,
{
    if cut(Mechanism::BodyDrain) {
        return;
    }
    let mut seen = 0u64;
    while seen <= cap {
        match tokio::time::timeout(DISCARD_IDLE, stream.next()).await {
            Ok(Some(Ok(chunk))) => seen += chunk.as_ref().len() as u64,
            Ok(Some(Err(_)) | None) | Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_refused_body_is_read_up_to_its_cap_and_no_further() {
        let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
            (0..10).map(|_| Ok(vec![0u8; 10])).collect();
        let mut stream = futures::stream::iter(chunks);
        discard(&mut stream, 35).await;
        // 40 bytes were read (the chunk that passed 35 included); the rest is left.
        assert_eq!(stream.count().await, 6);
    }

    #[tokio::test]
    async fn a_failing_body_ends_the_discard() {
        let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
            vec![Ok(vec![1]), Err(std::io::Error::other("cut")), Ok(vec![2])];
        let mut stream = futures::stream::iter(chunks);
        discard(&mut stream, 1000).await;
        assert_eq!(stream.count().await, 1);
    }

    #[test]
    fn only_bodies_under_twice_the_limit_are_drained() {
        assert!(worth_draining(128, 64));
        assert!(!worth_draining(129, 64));
    }
}
