//! The OpenAPI 3.1 document of `/api/v1`. Its paths and operations come from the handlers'
//! own `#[utoipa::path]` attributes, collected by the router that serves them
//! ([`super::api_routes`]); schemas come from the shared wire types (`nimbus_proto::wire`).
//! This module adds only what holds for every operation: bearer authentication unless an
//! operation opts out, and the JSON error body.

use std::sync::LazyLock;

use axum::response::IntoResponse;
use nimbus_proto::wire::{ErrorBody, ErrorCode, ErrorDetail};
use utoipa::OpenApi;
use utoipa::openapi::content::ContentBuilder;
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{Ref, RefOr};

#[derive(OpenApi)]
#[openapi(
    info(title = "Nimbus API", description = "Private cloud storage: per-user spaces on content-addressed blocks."),
    components(schemas(ErrorBody, ErrorDetail, ErrorCode))
)]
struct Doc;

/// The document, built once: the router is assembled only to collect its operations.
static DOCUMENT: LazyLock<utoipa::openapi::OpenApi> = LazyLock::new(build);

pub fn document() -> utoipa::openapi::OpenApi {
    DOCUMENT.clone()
}

fn build() -> utoipa::openapi::OpenApi {
    let mut doc = Doc::openapi();
    // The body limit only shapes a layer; any value gives the same operations.
    doc.merge(super::api_routes(0).into_openapi());
    doc.info.version = env!("CARGO_PKG_VERSION").to_string();
    if let Some(c) = doc.components.as_mut() {
        c.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
    // Every operation needs a token unless its attribute says `security(())`.
    doc.security = Some(vec![SecurityRequirement::new("bearer", Vec::<String>::new())]);
    // axum's catch-all `{*path}` is OpenAPI's `{path}` (a template matches one segment in
    // OpenAPI; the parameter's description says it is a whole path).
    let paths = std::mem::take(&mut doc.paths.paths);
    for (path, mut item) in paths {
        let path = path.replace("{*", "{");
        for (method, op) in operations(&mut item) {
            // Handler names repeat across modules (`list`) and one handler may serve GET and
            // HEAD: the ids come from method and path, which are unique.
            op.operation_id = Some(operation_id(method, &path));
            let error = ResponseBuilder::new()
                .description("error: `code` says which (docs/API.md)")
                .content(
                    "application/json",
                    ContentBuilder::new().schema(Some(Ref::from_schema_name("ErrorBody"))).build(),
                )
                .build();
            op.responses.responses.insert("4XX".into(), RefOr::T(error.clone()));
            op.responses.responses.insert("5XX".into(), RefOr::T(error));
        }
        doc.paths.paths.insert(path, item);
    }
    doc
}

/// `get` + `/api/v1/admin/users/{id}/devices` → `get_admin_users_id_devices`.
fn operation_id(method: &str, path: &str) -> String {
    let rest = path.trim_start_matches("/api/v1/");
    let words: Vec<String> = rest
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    format!("{method}_{}", words.join("_"))
}

fn operations(
    item: &mut utoipa::openapi::PathItem,
) -> impl Iterator<Item = (&'static str, &mut utoipa::openapi::path::Operation)> {
    [
        ("get", &mut item.get),
        ("put", &mut item.put),
        ("post", &mut item.post),
        ("delete", &mut item.delete),
        ("options", &mut item.options),
        ("head", &mut item.head),
        ("patch", &mut item.patch),
        ("trace", &mut item.trace),
    ]
    .into_iter()
    .filter_map(|(m, op)| Some((m, op.as_mut()?)))
}

#[utoipa::path(
    get,
    path = "/api/v1/openapi.json",
    tag = "service",
    summary = "This OpenAPI 3.1 document",
    responses((status = 200, description = "the document", content_type = "application/json")),
    security(())
)]
pub async fn serve() -> impl IntoResponse {
    axum::Json(document())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use std::collections::BTreeSet;

    fn doc() -> Value {
        serde_json::to_value(document()).unwrap_or_default()
    }

    fn ops(doc: &Value) -> Vec<(String, String, Value)> {
        let mut out = Vec::new();
        for (path, item) in doc["paths"].as_object().into_iter().flatten() {
            for (method, op) in item.as_object().into_iter().flatten() {
                out.push((path.clone(), method.clone(), op.clone()));
            }
        }
        out
    }

    #[test]
    fn the_change_feed_is_described_with_its_parameters() {
        let doc = doc();
        let op = &doc["paths"]["/api/v1/changes"]["get"];
        let names: Vec<&str> = op["parameters"]
            .as_array()
            .map(|p| p.iter().filter_map(|p| p["name"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(names, ["cursor", "wait", "limit"]);
        assert_eq!(
            op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/ChangeList"
        );
        for schema in ["Change", "ChangeList", "ChangeOp", "ErrorBody", "ErrorCode"] {
            assert!(doc["components"]["schemas"][schema].is_object(), "{schema} missing");
        }
    }

    /// Every `{name}` of a path is a required path parameter with a schema, and every
    /// parameter has one (client generators cannot type a parameter without).
    #[test]
    fn every_parameter_has_a_schema() {
        let doc = doc();
        let all = ops(&doc);
        assert!(all.len() > 40, "only {} operations", all.len());
        for (path, method, op) in all {
            let params = op["parameters"].as_array().cloned().unwrap_or_default();
            for p in &params {
                assert!(p["schema"].is_object(), "{method} {path}: parameter {} has no schema", p["name"]);
            }
            let templated: BTreeSet<&str> =
                path.split('/').filter_map(|s| s.strip_prefix('{')?.strip_suffix('}')).collect();
            let declared: BTreeSet<&str> = params
                .iter()
                .filter(|p| p["in"] == "path")
                .filter(|p| p["required"] == true)
                .filter_map(|p| p["name"].as_str())
                .collect();
            assert_eq!(templated, declared, "{method} {path}: path parameters");
        }
    }

    #[test]
    fn operation_ids_are_unique() {
        let doc = doc();
        let mut seen = BTreeSet::new();
        for (path, method, op) in ops(&doc) {
            let id = op["operationId"].as_str().unwrap_or_default().to_string();
            assert!(
                !id.is_empty() && seen.insert(id.clone()),
                "{method} {path}: operationId {id:?} missing or repeated"
            );
        }
        assert_eq!(doc["paths"]["/api/v1/files/{path}"]["head"]["operationId"], "head_files_path");
    }

    /// The error body, bearer authentication except where an operation opts out.
    #[test]
    fn errors_and_authentication_are_described() {
        let doc = doc();
        let codes = doc["components"]["schemas"]["ErrorCode"]["enum"].as_array().cloned().unwrap_or_default();
        let codes: Vec<&str> = codes.iter().filter_map(Value::as_str).collect();
        assert_eq!(codes, ErrorCode::ALL.map(ErrorCode::as_str));
        assert_eq!(doc["security"][0]["bearer"], Value::Array(vec![]));
        let mut open = Vec::new();
        for (path, method, op) in ops(&doc) {
            assert_eq!(
                op["responses"]["4XX"]["content"]["application/json"]["schema"]["$ref"],
                "#/components/schemas/ErrorBody",
                "{method} {path}"
            );
            if op["security"] == serde_json::json!([{}]) {
                open.push(format!("{method} {path}"));
            }
        }
        open.sort();
        // Signing in needs no token: a password, or single sign-on's browser and native legs.
        assert_eq!(
            open,
            [
                "get /api/v1/auth/methods",
                "get /api/v1/auth/oidc/callback",
                "get /api/v1/auth/oidc/start",
                "get /api/v1/info",
                "get /api/v1/openapi.json",
                "post /api/v1/auth/login",
                "post /api/v1/auth/oidc/token",
            ]
        );
    }

    /// Every route the API router serves under `/api/v1` is in the document. axum cannot list a
    /// router's routes, but its `Debug` output names every path (`Node { paths: ... }`);
    /// if that ever changes, the count check below fails rather than the test passing empty.
    #[test]
    fn every_route_is_described() {
        let (router, _) = super::super::api_routes(0).split_for_parts();
        let debug = format!("{router:?}");
        let mut served = BTreeSet::new();
        for piece in debug.split('"').skip(1).step_by(2) {
            if piece.starts_with("/api/v1") {
                served.insert(piece.to_string());
            }
        }
        assert!(served.len() > 30, "found only {} routes in the router's Debug output: {debug}", served.len());
        let doc = doc();
        let described: BTreeSet<String> =
            doc["paths"].as_object().into_iter().flatten().map(|(p, _)| p.clone()).collect();
        let mut missing = Vec::new();
        for path in &served {
            if super::super::ROOT_ALIASES.contains(&path.as_str()) {
                continue;
            }
            if !described.contains(&path.replace("{*", "{")) {
                missing.push(path.clone());
            }
        }
        assert!(missing.is_empty(), "routes without a description: {missing:?}");
        // And the other way: nothing is described that the router does not serve.
        let served: BTreeSet<String> = served.iter().map(|p| p.replace("{*", "{")).collect();
        let extra: Vec<&String> = described.difference(&served).collect();
        assert!(extra.is_empty(), "described but not served: {extra:?}");
    }
}
