//! Work split over the machine's cores: CPU-bound steps of a read (an image's entry heads, its
//! records) that run thousands of times.

/// `f` over `items` in one chunk per core (at most 8), each on a thread of its own, in order;
/// `f` is given each chunk's first index. Fewer than `min` items, or one core: one chunk, here.
/// A chunk whose thread panicked comes back as `Err(chunk)`.
pub fn over_cores<'a, T: Sync, R: Send>(
    items: &'a [T],
    min: usize,
    f: impl Fn(usize, &'a [T]) -> R + Sync,
) -> Vec<Result<R, &'a [T]>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    if threads < 2 || items.len() < min {
        return vec![Ok(f(0, items))];
    }
    let per = items.len().div_ceil(threads);
    let f = &f;
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks(per)
            .enumerate()
            .map(|(i, chunk)| (chunk, scope.spawn(move || f(i * per, chunk))))
            .collect();
        handles
            .into_iter()
            .map(|(chunk, h)| h.join().map_err(|_| chunk))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_items_in_order_with_their_first_index() {
        let items: Vec<usize> = (0..5000).collect();
        for min in [1, 10_000] {
            let parts = over_cores(&items, min, |first, chunk| {
                assert_eq!(chunk[0], first);
                chunk.to_vec()
            });
            let all: Vec<usize> = parts.into_iter().flat_map(|p| p.unwrap()).collect();
            assert_eq!(all, items);
        }
    }
}
