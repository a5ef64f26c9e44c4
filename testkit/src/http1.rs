//! HTTP/1.1 on the wire, as the loopback proxies relay it: one request read off a client
//! connection, forwarded on a fresh upstream connection, and its answer made keep-alive safe.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Where the head of `bytes` (a request or an answer) ends: after its blank line, or at its end.
pub fn head_end(bytes: &[u8]) -> usize {
    bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(bytes.len(), |p| p + 4)
}

/// Read one request (head and a Content-Length body) from `sock`, `buf` keeping what came after it; None at EOF.
pub async fn read_request(
    sock: &mut TcpStream,
    buf: &mut Vec<u8>,
) -> std::io::Result<Option<Vec<u8>>> {
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut headers);
        if let Ok(httparse::Status::Complete(head_len)) = req.parse(buf) {
            let len = req
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                .and_then(|h| {
                    std::str::from_utf8(h.value)
                        .ok()?
                        .trim()
                        .parse::<usize>()
                        .ok()
                })
                .unwrap_or(0);
            while buf.len() < head_len + len {
                if !read_more(sock, buf).await? {
                    return Ok(None);
                }
            }
            return Ok(Some(buf.drain(..head_len + len).collect()));
        }
        if !read_more(sock, buf).await? {
            return Ok(None);
        }
    }
}

/// Append what `sock` has next to `buf`; false at EOF.
async fn read_more(sock: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<bool> {
    let mut chunk = [0u8; 65536];
    let n = sock.read(&mut chunk).await?;
    buf.extend_from_slice(&chunk[..n]);
    Ok(n > 0)
}

/// Forward one request on a fresh upstream connection (`Connection: close`); the whole answer.
pub async fn forward(upstream: &str, request: &[u8]) -> std::io::Result<Vec<u8>> {
    let end = head_end(request);
    let head = String::from_utf8_lossy(&request[..end]);
    let mut out = String::new();
    for line in head.split("\r\n") {
        if line.to_ascii_lowercase().starts_with("connection:") || line.is_empty() {
            continue;
        }
        out.push_str(line);
        out.push_str("\r\n");
    }
    out.push_str("Connection: close\r\n\r\n");
    let mut up = TcpStream::connect(upstream).await?;
    let _ = up.set_nodelay(true);
    up.write_all(out.as_bytes()).await?;
    up.write_all(&request[end..]).await?;
    let mut answer = Vec::new();
    up.read_to_end(&mut answer).await?;
    Ok(answer)
}

/// Whether `request` is a HEAD request.
pub fn is_head(request: &[u8]) -> bool {
    request.starts_with(b"HEAD ")
}

/// The answer to `request` made keep-alive safe: its length stated (a HEAD answer keeps its own headers).
pub fn keep_alive(answer: Vec<u8>, request: &[u8]) -> Vec<u8> {
    let head_request = is_head(request);
    let end = head_end(&answer);
    let head = String::from_utf8_lossy(&answer[..end]);
    let body = &answer[end..];
    let mut out = String::new();
    for line in head.split("\r\n") {
        let l = line.to_ascii_lowercase();
        let framing = l.starts_with("content-length:") || l.starts_with("transfer-encoding:");
        if l.starts_with("connection:") || (framing && !head_request) || line.is_empty() {
            continue;
        }
        out.push_str(line);
        out.push_str("\r\n");
    }
    if !head_request {
        out.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    out.push_str("\r\n");
    let mut v = out.into_bytes();
    v.extend_from_slice(body);
    v
}
