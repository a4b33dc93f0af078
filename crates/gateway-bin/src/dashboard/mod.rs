//! The dashboard: one page (`index.html`, `app.css`, `app.js`, the icon)
//! embedded in the binary and served by `cairn serve` at `/`. The static
//! files need no token and carry no data; every value the page shows comes
//! from the API, which stays behind the bearer token. The page reads the
//! token from the URL fragment or asks for it, keeps it in session storage
//! and sends it as `Authorization: Bearer`, never in a query or a cookie.
//!
//! Every static answer carries a strict Content-Security-Policy (scripts,
//! styles and connections from this origin only, no inline script, no
//! framing); [`api_headers`] marks every API answer `no-store` and
//! `nosniff`.

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// The policy every page asset is served with.
pub(crate) const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const INDEX_HTML: &str = include_str!("index.html");
const APP_CSS: &str = include_str!("app.css");
const APP_JS: &str = include_str!("app.js");
const FAVICON_SVG: &str = include_str!("favicon.svg");

/// The page's routes; mounted beside the API, outside its token check.
pub(crate) fn router() -> Router {
    Router::new()
        .route("/", get(|| async { asset("text/html; charset=utf-8", INDEX_HTML) }))
        .route("/index.html", get(|| async { asset("text/html; charset=utf-8", INDEX_HTML) }))
        .route("/app.css", get(|| async { asset("text/css; charset=utf-8", APP_CSS) }))
        .route("/app.js", get(|| async { asset("text/javascript; charset=utf-8", APP_JS) }))
        .route("/favicon.svg", get(|| async { asset("image/svg+xml", FAVICON_SVG) }))
        // Browsers ask for this name on their own; it gets the same icon.
        .route("/favicon.ico", get(|| async { asset("image/svg+xml", FAVICON_SVG) }))
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
        (header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY)),
        (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
        (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
        (header::REFERRER_POLICY, HeaderValue::from_static("no-referrer")),
        // The assets change with the binary: revalidate rather than keep a stale page.
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        (HeaderName::from_static("cross-origin-opener-policy"), HeaderValue::from_static("same-origin")),
    ];
    (headers, body).into_response()
}

/// Marks every API answer as not to be stored by the browser or a proxy,
/// and not to be sniffed as another type.
pub(crate) async fn api_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_its_script_and_style_from_files_only() {
        // The CSP forbids inline script and style: the page must not need them.
        assert!(!INDEX_HTML.contains("<script>"), "inline script in index.html");
        assert!(!INDEX_HTML.contains("<style"), "inline style in index.html");
        assert!(!INDEX_HTML.contains(" style="), "style attribute in index.html");
        assert!(!has_inline_handler(INDEX_HTML), "inline event handler in index.html");
        assert!(INDEX_HTML.contains(r#"<script src="/app.js" defer></script>"#));
        assert!(INDEX_HTML.contains(r#"href="/app.css""#));
    }

    /// ` onclick=`, ` onload=`: an attribute made of `on`, letters and `=`.
    fn has_inline_handler(html: &str) -> bool {
        html.match_indices(" on").any(|(at, _)| {
            let rest = &html[at + 3..];
            let letters = rest.bytes().take_while(u8::is_ascii_lowercase).count();
            letters > 0 && rest.as_bytes().get(letters) == Some(&b'=')
        })
    }

    #[test]
    fn the_inline_handler_check_sees_handlers_only() {
        assert!(has_inline_handler(r#"<body onload="x()">"#));
        assert!(!has_inline_handler("<p>one of the ones</p>"));
    }

    #[test]
    fn the_script_never_writes_html_from_strings() {
        for forbidden in ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"] {
            assert!(!APP_JS.contains(forbidden), "app.js uses {forbidden}");
        }
    }
}
