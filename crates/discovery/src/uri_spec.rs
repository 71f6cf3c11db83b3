//! `UriSpec`: a URI template with variables filled from an instance (Curator's `UriSpec`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{DiscoveryError, Result};

/// One token of a [`UriSpec`]: literal text, or the name of a variable (Curator's `UriSpec.Part`,
/// written as `{"value":"scheme","variable":true}`).
///
/// ```
/// use zk_recipes_discovery::UriSpecPart;
///
/// let part = UriSpecPart::variable("port");
/// assert_eq!(serde_json::to_string(&part).unwrap(), r#"{"value":"port","variable":true}"#);
/// assert_eq!(UriSpecPart::literal("://").value, "://");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct UriSpecPart {
    /// The literal text, or the variable's name.
    #[serde(default)]
    pub value: String,
    /// Whether `value` names a variable (a `{...}` field).
    #[serde(default)]
    pub variable: bool,
}

impl UriSpecPart {
    /// Literal text.
    pub fn literal(value: impl Into<String>) -> Self {
        Self { value: value.into(), variable: false }
    }

    /// A variable, replaced when the spec is resolved.
    pub fn variable(name: impl Into<String>) -> Self {
        Self { value: name.into(), variable: true }
    }
}

/// A URI template whose `{fields}` are filled from a service instance (Curator's `UriSpec`):
/// `"{scheme}://{address}:{port}"` resolves to `http://10.0.0.7:8080`.
///
/// The variables, as Curator names them:
///
/// | variable | value |
/// |---|---|
/// | `scheme` | `https` if the instance has an SSL port, else `http` (also without an instance) |
/// | `name`, `id`, `address` | the instance's |
/// | `port`, `ssl-port` | the instance's ports (empty when not set) |
/// | `registration-time-utc` | milliseconds since the epoch |
/// | `service-type` | `dynamic`, `static`, `permanent` or `dynamic_sequential` |
/// | `[`, `]` | a literal `{` and `}` |
///
/// A variable the spec names but nobody gives is left out (an empty string), as in Curator.
///
/// It is stored with the instance as Curator's JSON (`{"parts":[{"value":"scheme","variable":true},
/// ...]}`), so a Java reader's `buildUriSpec()` gives the same URI.
///
/// ```
/// use zk_recipes_discovery::{ServiceInstance, UriSpec};
///
/// let spec: UriSpec = "{scheme}://{address}:{port}/{name}".parse()?;
/// let instance = ServiceInstance::builder("api").address("10.0.0.7").port(8080).uri_spec(spec.clone()).build();
/// assert_eq!(spec.resolve(&instance), "http://10.0.0.7:8080/api");
/// let secure = ServiceInstance::builder("api").address("10.0.0.7").ssl_port(8443).build();
/// assert_eq!(UriSpec::parse("{scheme}://{address}:{ssl-port}")?.resolve(&secure), "https://10.0.0.7:8443");
/// assert_eq!(spec.to_string(), "{scheme}://{address}:{port}/{name}");
/// # Ok::<(), zk_recipes_discovery::DiscoveryError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct UriSpec {
    #[serde(default)]
    parts: Vec<UriSpecPart>,
}

/// The name of the variable replaced by `http` or `https` (Curator's `FIELD_SCHEME`).
pub const FIELD_SCHEME: &str = "scheme";
/// The instance's name (Curator's `FIELD_NAME`).
pub const FIELD_NAME: &str = "name";
/// The instance's id (Curator's `FIELD_ID`).
pub const FIELD_ID: &str = "id";
/// The instance's address (Curator's `FIELD_ADDRESS`).
pub const FIELD_ADDRESS: &str = "address";
/// The instance's port (Curator's `FIELD_PORT`).
pub const FIELD_PORT: &str = "port";
/// The instance's SSL port (Curator's `FIELD_SSL_PORT`).
pub const FIELD_SSL_PORT: &str = "ssl-port";
/// The instance's registration time, in ms (Curator's `FIELD_REGISTRATION_TIME_UTC`).
pub const FIELD_REGISTRATION_TIME_UTC: &str = "registration-time-utc";
/// The instance's service type, lower case (Curator's `FIELD_SERVICE_TYPE`).
pub const FIELD_SERVICE_TYPE: &str = "service-type";
/// Always replaced by `{` (Curator's `FIELD_OPEN_BRACE`).
pub const FIELD_OPEN_BRACE: &str = "[";
/// Always replaced by `}` (Curator's `FIELD_CLOSE_BRACE`).
pub const FIELD_CLOSE_BRACE: &str = "]";

impl UriSpec {
    /// Parses a spec as Curator's `new UriSpec(raw)`: text between `{` and `}` is a variable (its
    /// name trimmed), the rest is literal; `{}` adds nothing.
    ///
    /// # Errors
    /// [`DiscoveryError::InvalidUriSpec`] for a `{` inside a variable, a `}` without its `{`, or a
    /// variable not closed, as Curator refuses them.
    ///
    /// ```
    /// use zk_recipes_discovery::{UriSpec, UriSpecPart};
    ///
    /// let spec = UriSpec::parse("{scheme}://{ address }:80")?;
    /// assert_eq!(spec.parts()[2], UriSpecPart::variable("address"));
    /// assert!(UriSpec::parse("{scheme").is_err());
    /// # Ok::<(), zk_recipes_discovery::DiscoveryError>(())
    /// ```
    pub fn parse(raw: &str) -> Result<Self> {
        let invalid = |reason| DiscoveryError::InvalidUriSpec { spec: raw.to_owned(), reason };
        let mut parts = Vec::new();
        let mut inside_variable = false;
        let mut rest = raw;
        while !rest.is_empty() {
            let token_end = rest.find(['{', '}']).unwrap_or(rest.len());
            if token_end == 0 {
                if rest.starts_with('{') {
                    if inside_variable {
                        return Err(invalid("{ is not allowed inside of a variable specification"));
                    }
                    inside_variable = true;
                } else {
                    if !inside_variable {
                        return Err(invalid("} must be preceded by {"));
                    }
                    inside_variable = false;
                }
                rest = &rest[1..];
                continue;
            }
            let token = &rest[..token_end];
            parts.push(match inside_variable {
                true => UriSpecPart::variable(java_trim(token)),
                false => UriSpecPart::literal(token),
            });
            rest = &rest[token_end..];
        }
        if inside_variable {
            return Err(invalid("final variable not closed - expected }"));
        }
        Ok(Self { parts })
    }

    /// A spec of these parts (Curator's `new UriSpec()` and `add(part)` calls).
    ///
    /// ```
    /// use zk_recipes_discovery::{UriSpec, UriSpecPart};
    ///
    /// let spec = UriSpec::from_parts(vec![UriSpecPart::variable("address"), UriSpecPart::literal(":80")]);
    /// assert_eq!(spec.to_string(), "{address}:80");
    /// ```
    pub fn from_parts(parts: Vec<UriSpecPart>) -> Self {
        Self { parts }
    }

    /// The parts, in order (Curator's `getParts`).
    pub fn parts(&self) -> &[UriSpecPart] {
        &self.parts
    }

    /// Adds a part at the end (Curator's `add`).
    pub fn push(&mut self, part: UriSpecPart) {
        self.parts.push(part);
    }
}

/// Java's `String.trim()`: drops leading and trailing characters up to U+0020.
fn java_trim(text: &str) -> &str {
    text.trim_matches(|character: char| character <= ' ')
}

impl FromStr for UriSpec {
    type Err = DiscoveryError;

    fn from_str(raw: &str) -> Result<Self> {
        Self::parse(raw)
    }
}

impl fmt::Display for UriSpec {
    /// The spec as text again: variables in braces, literals as they are.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for part in &self.parts {
            match part.variable {
                true => write!(f, "{{{}}}", part.value)?,
                false => f.write_str(&part.value)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsing_matches_curators_tokenizer() {
        // Curator 5.4 wrote these parts for "{scheme}://{ address }:{port}/{}{ }{unknown}x".
        let spec = UriSpec::parse("{scheme}://{ address }:{port}/{}{ }{unknown}x").expect("spec");
        let expected = vec![
            UriSpecPart::variable("scheme"),
            UriSpecPart::literal("://"),
            UriSpecPart::variable("address"),
            UriSpecPart::literal(":"),
            UriSpecPart::variable("port"),
            UriSpecPart::literal("/"),
            UriSpecPart::variable(""),
            UriSpecPart::variable("unknown"),
            UriSpecPart::literal("x"),
        ];
        assert_eq!(spec.parts(), expected.as_slice());
        assert_eq!(
            serde_json::to_string(&spec).expect("json"),
            r#"{"parts":[{"value":"scheme","variable":true},{"value":"://","variable":false},{"value":"address","variable":true},{"value":":","variable":false},{"value":"port","variable":true},{"value":"/","variable":false},{"value":"","variable":true},{"value":"unknown","variable":true},{"value":"x","variable":false}]}"#
        );
        assert!(UriSpec::parse("{a{b}}").is_err());
        assert!(UriSpec::parse("a}").is_err());
        assert!(UriSpec::parse("{a").is_err());
        assert_eq!(UriSpec::parse("").expect("empty").parts(), &[]);
    }
}
