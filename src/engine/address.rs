//! Resource instance addresses, as terraform prints them, and the resources they belong to.

/// Quote a for_each key the way terraform prints it inside `[...]`.
pub fn quote_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 2);
    out.push('"');
    let mut chars = key.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '$' | '%' if chars.peek() == Some(&'{') => {
                out.push(c);
                out.push(c);
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// One instance's index key: none, a count index or a for_each key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IndexKey {
    /// A resource without count or for_each.
    None,
    /// A count index.
    Int(i64),
    /// A for_each key.
    Str(String),
}

impl IndexKey {
    /// The `[...]` suffix terraform prints for this key.
    pub fn suffix(&self) -> String {
        match self {
            IndexKey::None => String::new(),
            IndexKey::Int(i) => format!("[{i}]"),
            IndexKey::Str(s) => format!("[{}]", quote_key(s)),
        }
    }
}

/// The full address of one resource instance object, as terraform prints it.
pub fn instance_address(
    module: Option<&str>,
    mode: &str,
    type_name: &str,
    name: &str,
    key: &IndexKey,
    deposed: Option<&str>,
) -> String {
    let mut out = String::new();
    if let Some(m) = module.filter(|m| !m.is_empty()) {
        out.push_str(m);
        out.push('.');
    }
    if mode == "data" {
        out.push_str("data.");
    }
    out.push_str(type_name);
    out.push('.');
    out.push_str(name);
    out.push_str(&key.suffix());
    if let Some(d) = deposed {
        out.push_str(" (deposed ");
        out.push_str(d);
        out.push(')');
    }
    out
}

/// The dot-separated names of an address, each instance key (`[...]`, quoted keys read with their escapes) left out: `module.m["a.b"].t.n[0]` is `module`, `m`, `t`, `n`.
///
/// The one reading of an address's structure: [`resource_of`], [`module_calls`] and
/// [`referenced`] are each a view of it.
pub fn parts(address: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for c in address.chars() {
        if depth > 0 {
            if in_string {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == '"' {
                    in_string = false;
                }
                continue;
            }
            match c {
                '"' => in_string = true,
                '[' => depth += 1,
                ']' => depth -= 1,
                _ => {}
            }
            continue;
        }
        match c {
            '[' => depth = 1,
            '.' => out.push(String::new()),
            c => {
                if let Some(last) = out.last_mut() {
                    last.push(c);
                }
            }
        }
    }
    out
}

/// An address without its ` (deposed KEY)` suffix.
fn without_deposed(address: &str) -> &str {
    match address.find(" (deposed ") {
        Some(i) => &address[..i],
        None => address,
    }
}

/// The resource (or module call) an instance address belongs to: instance keys and any `(deposed KEY)` left out.
pub fn resource_of(address: &str) -> String {
    parts(without_deposed(address)).join(".")
}

/// The module calls of a module instance path, in order: `module.a[0].module.b["x"]` calls `a`, then `b`.
pub fn module_calls(module: &str) -> Vec<String> {
    let mut calls = Vec::new();
    let mut it = parts(module).into_iter().filter(|n| !n.is_empty());
    while let Some(n) = it.next() {
        if n == "module"
            && let Some(call) = it.next()
        {
            calls.push(call);
        }
    }
    calls
}

/// The resource (or `module.NAME` call) a configuration reference names (`aws_vpc.v.id`, `module.n.out`), made absolute with module path `prefix` (`module.a.`); none for a variable, local, data source or other symbol.
pub fn referenced(prefix: &str, reference: &str) -> Option<String> {
    match parts(reference).as_slice() {
        [first, ..]
            if matches!(
                first.as_str(),
                "var" | "local" | "count" | "each" | "path" | "terraform" | "self" | "data"
            ) =>
        {
            None
        }
        [module, name, ..] if module == "module" => Some(format!("{prefix}module.{name}")),
        [ty, name, ..] => Some(format!("{prefix}{ty}.{name}")),
        _ => None,
    }
}

/// Whether the dependency `dep` (a resource or `module.NAME` address) names the instance `address`.
pub fn names(dep: &str, address: &str) -> bool {
    let resource = resource_of(address);
    resource == dep || resource.starts_with(&format!("{dep}."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_print_like_terraform() {
        let k = IndexKey::Str("a\"b${c}".into());
        assert_eq!(
            instance_address(
                Some("module.net[0]"),
                "managed",
                "terraform_data",
                "x",
                &k,
                None
            ),
            r#"module.net[0].terraform_data.x["a\"b$${c}"]"#
        );
        assert_eq!(
            instance_address(None, "data", "t", "n", &IndexKey::Int(2), Some("00abcd")),
            "data.t.n[2] (deposed 00abcd)"
        );
    }

    #[test]
    fn resources_of_instance_addresses() {
        assert_eq!(resource_of("terraform_data.a"), "terraform_data.a");
        assert_eq!(resource_of("terraform_data.a[0]"), "terraform_data.a");
        assert_eq!(
            resource_of("module.m[\"k]\"].aws_s3_bucket.b[\"x.y\"]"),
            "module.m.aws_s3_bucket.b"
        );
        assert_eq!(
            resource_of("terraform_data.a (deposed 0a1b2c3d)"),
            "terraform_data.a"
        );
        assert_eq!(
            resource_of("terraform_data.a[\"q\\\"]\"]"),
            "terraform_data.a"
        );
    }

    #[test]
    fn dependencies_name_instances_and_modules() {
        assert!(names("terraform_data.x", "terraform_data.x[1]"));
        assert!(!names("terraform_data.x", "terraform_data.xy"));
        assert!(names("module.m", "module.m[0].terraform_data.x"));
        assert!(!names("module.m", "module.mm.terraform_data.x"));
    }
}
