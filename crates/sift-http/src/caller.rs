//! Who is calling: the `Authorization` header of a request, as the
//! credentials its broker session signs in with.
//!
//! `Basic` carries a user name and password, `Bearer` a token. The HTTP
//! front-end checks neither: it opens (or reuses) a broker session that
//! signs in with them, so the broker decides, as it does for every door.
//! A request without the header acts through the front-end's anonymous
//! sessions, which a broker that requires sign-in refuses with 401.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use base64::Engine;
use sift_client::Credentials;

use crate::error::ApiError;

/// The credentials a request carries; `None` for an anonymous caller.
#[derive(Debug, Clone)]
pub(crate) struct Caller(pub Option<Credentials>);

/// The name the client certificate of the request's connection proves
/// (its TLS handshake checked it against the door's client CA).
#[derive(Debug, Clone)]
pub(crate) struct Certified(pub String);

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    /// The `Authorization` header's credentials; without one, the
    /// connection's client certificate; without either, anonymous.
    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let Some(value) = parts.headers.get(header::AUTHORIZATION) else {
            let certified = parts.extensions.get::<Certified>().map(|name| Credentials::certified(name.0.clone()));
            return Ok(Caller(certified));
        };
        let text = value.to_str().map_err(|_| malformed("the header is not ASCII"))?;
        parse(text).map(|credentials| Caller(Some(credentials)))
    }
}

/// The credentials of an `Authorization` header's value.
fn parse(text: &str) -> Result<Credentials, ApiError> {
    let (scheme, rest) =
        text.trim().split_once(' ').ok_or_else(|| malformed("expected `Basic ...` or `Bearer ...`"))?;
    let rest = rest.trim();
    if scheme.eq_ignore_ascii_case("bearer") {
        return Ok(Credentials::token(rest));
    }
    if !scheme.eq_ignore_ascii_case("basic") {
        return Err(malformed(&format!("scheme {scheme:?}: this front-end takes Basic and Bearer")));
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(rest)
        .map_err(|error| malformed(&format!("Basic credentials are not base64: {error}")))?;
    let decoded = String::from_utf8(decoded).map_err(|_| malformed("Basic credentials are not UTF-8"))?;
    let (user, password) =
        decoded.split_once(':').ok_or_else(|| malformed("Basic credentials are not `user:password`"))?;
    Ok(Credentials::password(user, password))
}

fn malformed(why: &str) -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, "auth_failed", format!("Authorization header: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_and_bearer_give_their_credentials_and_anything_else_is_refused() {
        let basic = base64::engine::general_purpose::STANDARD.encode("alice:wonder:land");
        assert_eq!(parse(&format!("Basic {basic}")).ok(), Some(Credentials::password("alice", "wonder:land")));
        assert_eq!(parse("bearer abc.def.ghi").ok(), Some(Credentials::token("abc.def.ghi")));
        for bad in [
            "Basic",
            "Basic !!!",
            "Digest x",
            &format!("Basic {}", base64::engine::general_purpose::STANDARD.encode("nocolon")),
        ] {
            let error = parse(bad).expect_err(bad);
            assert_eq!(error.status, StatusCode::UNAUTHORIZED, "{bad}");
        }
    }
}
