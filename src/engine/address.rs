//! Resource instance addresses, as terraform prints them, and the resources they belong to.
//!
//! The one reader of addresses: [`Address::parse`] (and [`check_provider`], [`check_output`])
//! reads one strictly, as the live protocol checks it; [`parts`] reads any text leniently
//! into its dot-separated names, for [`resource_of`], [`module_calls`] and [`referenced`].

use std::fmt;

use thiserror::Error;

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

/// Why a text is not an address as terraform prints it.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
#[error("{0}")]
pub struct AddressError(pub &'static str);

/// A resource instance address, made only by [`Address::parse`]: `module.m["k"].aws_instance.web[0]`, `data.x.y`, with ` (deposed KEY)` for a deposed object.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Address(String);

impl Address {
    /// Read a resource instance address as terraform prints it, all of it.
    pub fn parse(text: &str) -> Result<Address, AddressError> {
        whole(text, |c| c.instance())?;
        Ok(Address(text.to_string()))
    }

    /// The address as terraform prints it.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The resource (or module call) it belongs to: see [`resource_of`].
    pub fn resource(&self) -> String {
        resource_of(&self.0)
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Check that `text` is a provider configuration address: `provider["registry.terraform.io/hashicorp/aws"]`, with `.ALIAS` and a module path.
pub fn check_provider(text: &str) -> Result<(), AddressError> {
    whole(text, |c| c.provider())
}

/// Check that `text` is a root output's name: an identifier.
pub fn check_output(text: &str) -> Result<(), AddressError> {
    whole(text, |c| c.ident().map(|_| ()))
}

/// Run `parse` over all of `text`: what it leaves is refused.
fn whole<'a>(
    text: &'a str,
    parse: impl FnOnce(&mut Cursor<'a>) -> Result<(), &'static str>,
) -> Result<(), AddressError> {
    let mut c = Cursor { rest: text };
    parse(&mut c).map_err(AddressError)?;
    if !c.rest.is_empty() {
        return Err(AddressError("it has more after the address"));
    }
    Ok(())
}

/// A cursor over an address being read.
struct Cursor<'a> {
    rest: &'a str,
}

impl<'a> Cursor<'a> {
    fn eat(&mut self, prefix: &str) -> bool {
        match self.rest.strip_prefix(prefix) {
            Some(r) => {
                self.rest = r;
                true
            }
            None => false,
        }
    }

    fn peek(&self) -> Option<char> {
        self.rest.chars().next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.rest = &self.rest[c.len_utf8()..];
        Some(c)
    }

    /// An HCL identifier: a letter or `_`, then letters, digits, `_` or `-`.
    fn ident(&mut self) -> Result<&'a str, &'static str> {
        let start = self.rest;
        match self.peek() {
            Some(c) if c.is_alphabetic() || c == '_' => {}
            _ => return Err("a name must start with a letter or '_'"),
        }
        while let Some(c) = self.peek() {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                self.bump();
            } else {
                break;
            }
        }
        Ok(&start[..start.len() - self.rest.len()])
    }

    /// An instance key: `[0]` or `["key"]` (escapes as terraform prints them).
    fn index(&mut self) -> Result<(), &'static str> {
        if !self.eat("[") {
            return Ok(());
        }
        if self.eat("\"") {
            loop {
                match self.bump() {
                    None => return Err("a quoted key is not closed"),
                    Some('"') => break,
                    Some('\\') => match self.bump() {
                        Some('\\' | '"' | 'n' | 'r' | 't') => {}
                        Some('u') => self.hex(4)?,
                        Some('U') => self.hex(8)?,
                        _ => return Err("a quoted key has an unknown escape"),
                    },
                    Some(c) if c.is_control() => {
                        return Err("a quoted key holds a control character");
                    }
                    Some(_) => {}
                }
            }
        } else {
            self.eat("-");
            let digits = self.rest.len()
                - self
                    .rest
                    .trim_start_matches(|c: char| c.is_ascii_digit())
                    .len();
            if digits == 0 || digits > 19 {
                return Err("a key is a whole number or a quoted string");
            }
            self.rest = &self.rest[digits..];
        }
        if self.eat("]") {
            Ok(())
        } else {
            Err("a key is not closed with ']'")
        }
    }

    fn hex(&mut self, n: usize) -> Result<(), &'static str> {
        for _ in 0..n {
            match self.bump() {
                Some(c) if c.is_ascii_hexdigit() => {}
                _ => return Err("a \\u escape needs hex digits"),
            }
        }
        Ok(())
    }

    /// `module.NAME[KEY].` repeated.
    fn module_path(&mut self) -> Result<(), &'static str> {
        while self.eat("module.") {
            self.ident()?;
            self.index()?;
            if !self.eat(".") {
                return Err("a module path is followed by '.'");
            }
        }
        Ok(())
    }

    /// A resource instance address, ` (deposed KEY)` included.
    fn instance(&mut self) -> Result<(), &'static str> {
        self.module_path()?;
        // A data resource: `data.` before its type.
        self.eat("data.");
        self.ident()?;
        if !self.eat(".") {
            return Err("a resource address is TYPE.NAME");
        }
        self.ident()?;
        self.index()?;
        if self.eat(" (deposed ") {
            let key = self.rest.len()
                - self
                    .rest
                    .trim_start_matches(|ch: char| ch.is_ascii_alphanumeric())
                    .len();
            if key == 0 {
                return Err("a deposed object names its key");
            }
            self.rest = &self.rest[key..];
            if !self.eat(")") {
                return Err("(deposed KEY) is not closed");
            }
        }
        Ok(())
    }

    /// A provider configuration address.
    fn provider(&mut self) -> Result<(), &'static str> {
        self.module_path()?;
        if !self.eat("provider[\"") {
            return Err("it starts with provider[\"SOURCE\"]");
        }
        let source = self.rest.len()
            - self
                .rest
                .trim_start_matches(|ch: char| {
                    ch.is_ascii_alphanumeric() || matches!(ch, '.' | '/' | '-' | '_')
                })
                .len();
        if source == 0 {
            return Err("the provider source is empty or holds other characters");
        }
        self.rest = &self.rest[source..];
        if !self.eat("\"]") {
            return Err("provider[\"SOURCE\"] is not closed");
        }
        if self.eat(".") {
            self.ident()?;
        }
        Ok(())
    }
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

    #[test]
    fn one_reading_gives_names_module_calls_and_references() {
        assert_eq!(parts("module.m[\"a.b\"].t.n[0]"), ["module", "m", "t", "n"]);
        assert_eq!(
            module_calls("module.a[0].module.b[\"x.module.y\"]"),
            ["a", "b"]
        );
        assert!(module_calls("").is_empty());
        assert_eq!(
            referenced("module.m.", "terraform_data.w[0].id").as_deref(),
            Some("module.m.terraform_data.w")
        );
        assert_eq!(referenced("", "module.n.out").as_deref(), Some("module.n"));
        for symbol in [
            "var.x",
            "local.l",
            "each.key",
            "data.x.y.id",
            "count.index",
            "x",
        ] {
            assert_eq!(referenced("", symbol), None, "{symbol}");
        }
    }

    #[test]
    fn an_address_is_made_only_by_reading_it_whole() {
        let a = Address::parse("module.m[\"k\"].aws_instance.web[0]").unwrap();
        assert_eq!(a.as_str(), "module.m[\"k\"].aws_instance.web[0]");
        assert_eq!(a.resource(), "module.m.aws_instance.web");
        assert!(Address::parse("data.x.y (deposed 00ab)").is_ok());
        assert_eq!(
            Address::parse("aws_instance.web extra"),
            Err(AddressError("it has more after the address"))
        );
        assert_eq!(
            Address::parse("module.m.aws_instance"),
            Err(AddressError("a resource address is TYPE.NAME"))
        );
        assert!(check_provider("module.m.provider[\"h/n/t\"].a").is_ok());
        assert!(check_provider("provider.aws").is_err());
        assert!(check_output("out_1").is_ok() && check_output("a.b").is_err());
    }
}
