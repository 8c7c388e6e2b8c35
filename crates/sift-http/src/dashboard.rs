//! `GET /`: the dashboard, one page with its script and styles, embedded in
//! the binary so that nothing is built or fetched on the user's machine.
//!
//! The page reads the same JSON as everyone else (`/v1/admin/*`) and tails
//! messages through an HTTP subscription's event stream; it has no
//! endpoint of its own. For work on the page, `SIFT_HTTP_ASSETS_DIR` names
//! a directory to serve the files from instead, read on each request.

use axum::extract::Path;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

/// The dashboard's files: name, content type, embedded content.
const ASSETS: [(&str, &str, &str); 3] = [
    ("index.html", "text/html; charset=utf-8", include_str!("../assets/index.html")),
    ("dashboard.js", "text/javascript; charset=utf-8", include_str!("../assets/dashboard.js")),
    ("dashboard.css", "text/css; charset=utf-8", include_str!("../assets/dashboard.css")),
];

/// Environment variable naming a directory to serve the files from.
pub const ASSETS_DIR_VARIABLE: &str = "SIFT_HTTP_ASSETS_DIR";

/// `GET /`.
pub(crate) async fn index() -> Response {
    asset("index.html")
}

/// `GET /assets/{name}`.
pub(crate) async fn named(Path(name): Path<String>) -> Response {
    asset(&name)
}

fn asset(name: &str) -> Response {
    let Some((_, content_type, embedded)) = ASSETS.iter().find(|(known, _, _)| *known == name) else {
        return (StatusCode::NOT_FOUND, "no such dashboard file").into_response();
    };
    let body = match std::env::var_os(ASSETS_DIR_VARIABLE) {
        Some(directory) => match std::fs::read_to_string(std::path::Path::new(&directory).join(name)) {
            Ok(text) => text,
            Err(error) => return (StatusCode::INTERNAL_SERVER_ERROR, format!("{name}: {error}")).into_response(),
        },
        None => (*embedded).to_string(),
    };
    ([(header::CONTENT_TYPE, *content_type), (header::CACHE_CONTROL, "no-cache")], body).into_response()
}
