//! The OpenAPI document, built from one table of routes; schemas come from the shared wire
//! types (`nimbus_proto::wire`, derived with utoipa).

use axum::response::IntoResponse;
use nimbus_proto::wire::*;
use utoipa::OpenApi;
use utoipa::openapi::content::ContentBuilder;
use utoipa::openapi::path::{HttpMethod, OperationBuilder, ParameterBuilder, ParameterIn};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{Ref, Required};

#[derive(OpenApi)]
#[openapi(
    info(title = "Nimbus API", description = "Private cloud storage: per-user spaces on content-addressed blocks."),
    components(schemas(
        ErrorBody,
        ErrorDetail,
        Role,
        LoginRequest,
        LoginResponse,
        UserRef,
        Me,
        UsageBreakdown,
        RetentionInfo,
        ServerInfo,
        EntryKind,
        Entry,
        DirListing,
        MoveRequest,
        BlockRef,
        MissingBlocksRequest,
        MissingBlocksResponse,
        CommitRequest,
        Manifest,
        VersionInfo,
        VersionList,
        RestoreVersionRequest,
        TrashEntry,
        TrashList,
        RestoreTrashRequest,
        TokenInfo,
        TokenList,
        CreateUserRequest,
        UserInfo,
        CreatedUser,
        UserList,
        UpdateUserRequest,
        AuditEntry,
        AuditList,
        ChangeOp,
        Change,
        ChangeList,
        CreateS3KeyRequest,
        CreatedS3Key,
        S3KeyInfo,
        S3KeyList,
        UsageSummary,
        UserUsage,
        CacheStats,
        WarmRequest,
        WarmState,
        WarmStatus,
        StatsSample,
        StatsHistory
    ))
)]
struct Doc;

/// (method, path, tag, summary, request schema, success status, response schema)
type Route =
    (HttpMethod, &'static str, &'static str, &'static str, Option<&'static str>, &'static str, Option<&'static str>);

const OCTETS: &str = "<octets>";

const ROUTES: &[Route] = &[
    (
        HttpMethod::Get,
        "/api/v1/info",
        "service",
        "Server version, block size and retention",
        None,
        "200",
        Some("ServerInfo"),
    ),
    (
        HttpMethod::Post,
        "/api/v1/auth/login",
        "auth",
        "Sign in; returns a bearer token",
        Some("LoginRequest"),
        "200",
        Some("LoginResponse"),
    ),
    (HttpMethod::Post, "/api/v1/auth/logout", "auth", "Revoke the calling token", None, "204", None),
    (HttpMethod::Get, "/api/v1/auth/tokens", "auth", "List your live tokens", None, "200", Some("TokenList")),
    (HttpMethod::Delete, "/api/v1/auth/tokens/{id}", "auth", "Revoke one of your tokens", None, "204", None),
    (
        HttpMethod::Get,
        "/api/v1/keys",
        "keys",
        "List your S3 access keys (never the secrets)",
        None,
        "200",
        Some("S3KeyList"),
    ),
    (
        HttpMethod::Post,
        "/api/v1/keys",
        "keys",
        "Create an S3 access key; the secret is returned once",
        Some("CreateS3KeyRequest"),
        "201",
        Some("CreatedS3Key"),
    ),
    (HttpMethod::Delete, "/api/v1/keys/{id}", "keys", "Revoke one of your S3 access keys", None, "204", None),
    (HttpMethod::Get, "/api/v1/me", "auth", "Your account and usage", None, "200", Some("Me")),
    (
        HttpMethod::Put,
        "/api/v1/files/{path}",
        "files",
        "Upload a whole file (streamed); If-Match / If-None-Match: *; X-Nimbus-Lock-Token when locked (else 423)",
        Some(OCTETS),
        "201",
        Some("Entry"),
    ),
    (
        HttpMethod::Get,
        "/api/v1/files/{path}",
        "files",
        "Download a file; Range, If-None-Match, If-Match, If-Range; ?version=",
        None,
        "200",
        Some(OCTETS),
    ),
    (HttpMethod::Head, "/api/v1/files/{path}", "files", "File headers only", None, "200", None),
    (
        HttpMethod::Delete,
        "/api/v1/files/{path}",
        "files",
        "Move a file or folder to the trash; X-Nimbus-Lock-Token when locked (else 423)",
        None,
        "204",
        None,
    ),
    (HttpMethod::Get, "/api/v1/stat/{path}", "files", "Entry of a file or folder", None, "200", Some("Entry")),
    (
        HttpMethod::Get,
        "/api/v1/dirs/{path}",
        "files",
        "List a folder (?limit=&cursor=)",
        None,
        "200",
        Some("DirListing"),
    ),
    (HttpMethod::Post, "/api/v1/dirs/{path}", "files", "Create a folder and its parents", None, "201", Some("Entry")),
    (
        HttpMethod::Post,
        "/api/v1/move",
        "files",
        "Move or rename (one transaction); X-Nimbus-Lock-Token when locked (else 423)",
        Some("MoveRequest"),
        "200",
        Some("Entry"),
    ),
    (HttpMethod::Post, "/api/v1/copy", "files", "Copy (blocks are shared)", Some("MoveRequest"), "201", Some("Entry")),
    (
        HttpMethod::Post,
        "/api/v1/blocks/missing",
        "blocks",
        "Which of these blocks does my space lack?",
        Some("MissingBlocksRequest"),
        "200",
        Some("MissingBlocksResponse"),
    ),
    (HttpMethod::Put, "/api/v1/blocks/{hash}", "blocks", "Upload one block (hash verified)", Some(OCTETS), "201", None),
    (HttpMethod::Get, "/api/v1/blocks/{hash}", "blocks", "Download one block (immutable)", None, "200", Some(OCTETS)),
    (
        HttpMethod::Post,
        "/api/v1/manifests/{path}",
        "blocks",
        "Commit a block list as the file's new version",
        Some("CommitRequest"),
        "201",
        Some("Entry"),
    ),
    (
        HttpMethod::Get,
        "/api/v1/manifests/{path}",
        "blocks",
        "A version's block list (?version=)",
        None,
        "200",
        Some("Manifest"),
    ),
    (
        HttpMethod::Get,
        "/api/v1/versions/{path}",
        "versions",
        "Versions of a file, newest first",
        None,
        "200",
        Some("VersionList"),
    ),
    (
        HttpMethod::Post,
        "/api/v1/versions/{path}",
        "versions",
        "Make an earlier version current",
        Some("RestoreVersionRequest"),
        "200",
        Some("Entry"),
    ),
    (
        HttpMethod::Delete,
        "/api/v1/versions/{path}",
        "versions",
        "Delete one older version (?version=)",
        None,
        "204",
        None,
    ),
    (HttpMethod::Get, "/api/v1/trash", "trash", "List the trash", None, "200", Some("TrashList")),
    (HttpMethod::Delete, "/api/v1/trash", "trash", "Empty the trash", None, "204", None),
    (
        HttpMethod::Post,
        "/api/v1/trash/{id}/restore",
        "trash",
        "Restore an item",
        Some("RestoreTrashRequest"),
        "200",
        Some("Entry"),
    ),
    (HttpMethod::Delete, "/api/v1/trash/{id}", "trash", "Purge an item", None, "204", None),
    (
        HttpMethod::Post,
        "/api/v1/admin/users",
        "admin",
        "Create a user",
        Some("CreateUserRequest"),
        "201",
        Some("CreatedUser"),
    ),
    (
        HttpMethod::Get,
        "/api/v1/admin/users",
        "admin",
        "List users (?q=&sort=name|usage|created, - for descending&limit=&cursor=)",
        None,
        "200",
        Some("UserList"),
    ),
    (HttpMethod::Get, "/api/v1/admin/users/{id}", "admin", "Get a user", None, "200", Some("UserInfo")),
    (
        HttpMethod::Patch,
        "/api/v1/admin/users/{id}",
        "admin",
        "Change quota, role, disabled, password",
        Some("UpdateUserRequest"),
        "200",
        Some("UserInfo"),
    ),
    (HttpMethod::Delete, "/api/v1/admin/users/{id}", "admin", "Delete a user with all their data", None, "204", None),
    (
        HttpMethod::Get,
        "/api/v1/changes",
        "changes",
        "Namespace changes of your space in commit order, long-polled (?cursor=&wait=&limit=)",
        None,
        "200",
        Some("ChangeList"),
    ),
    (
        HttpMethod::Get,
        "/api/v1/admin/audit",
        "admin",
        "Audit log (?user=&action=&limit=&cursor=)",
        None,
        "200",
        Some("AuditList"),
    ),
    (
        HttpMethod::Get,
        "/api/v1/admin/users/{id}/devices",
        "admin",
        "A user's devices (live tokens) with last use",
        None,
        "200",
        Some("TokenList"),
    ),
    (
        HttpMethod::Delete,
        "/api/v1/admin/users/{id}/devices",
        "admin",
        "Sign a user out of every device",
        None,
        "204",
        None,
    ),
    (
        HttpMethod::Delete,
        "/api/v1/admin/users/{id}/devices/{token}",
        "admin",
        "Revoke one of a user's devices",
        None,
        "204",
        None,
    ),
    (
        HttpMethod::Get,
        "/api/v1/admin/usage",
        "admin",
        "Storage totals and the largest users",
        None,
        "200",
        Some("UsageSummary"),
    ),
    (
        HttpMethod::Get,
        "/api/v1/admin/stats/history",
        "admin",
        "This gateway's request rate and cache hit ratio over the last hour",
        None,
        "200",
        Some("StatsHistory"),
    ),
    (HttpMethod::Get, "/api/v1/admin/cache", "admin", "Block cache statistics", None, "200", Some("CacheStats")),
    (HttpMethod::Delete, "/api/v1/admin/cache", "admin", "Empty the block cache", None, "204", None),
    (
        HttpMethod::Post,
        "/api/v1/admin/cache/warm",
        "admin",
        "Load a user's folder into the cache in the background",
        Some("WarmRequest"),
        "202",
        Some("WarmStatus"),
    ),
    (
        HttpMethod::Get,
        "/api/v1/admin/cache/warm/{id}",
        "admin",
        "Progress of a cache warm-up job",
        None,
        "200",
        Some("WarmStatus"),
    ),
];

/// Query parameters worth describing: (path, name, description).
const QUERY_PARAMS: &[(&str, &str, &str)] = &[
    (
        "/api/v1/changes",
        "cursor",
        "The `cursor` of the previous answer. Without it: no changes and the latest cursor (start from now).          Not a non-negative integer: 400. Beyond the space's latest change: `reset: true`",
    ),
    (
        "/api/v1/changes",
        "wait",
        "Long poll: seconds (0-60, default 0) to hold the request while nothing follows the cursor",
    ),
    ("/api/v1/changes", "limit", "Most changes returned (1-1000, default 1000); the rest come next call"),
];

fn content(schema: &str) -> utoipa::openapi::content::Content {
    if schema == OCTETS {
        ContentBuilder::new().build()
    } else {
        ContentBuilder::new().schema(Some(Ref::from_schema_name(schema))).build()
    }
}

fn mime(schema: &str) -> &'static str {
    if schema == OCTETS { "application/octet-stream" } else { "application/json" }
}

pub fn document() -> utoipa::openapi::OpenApi {
    let mut doc = Doc::openapi();
    doc.info.version = env!("CARGO_PKG_VERSION").to_string();
    if let Some(c) = doc.components.as_mut() {
        c.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
    for (method, path, tag, summary, req, status, resp) in ROUTES {
        let mut op = OperationBuilder::new().tag(*tag).summary(Some(*summary));
        for name in ["path", "id", "hash", "token"] {
            if path.contains(&format!("{{{name}}}")) {
                op = op.parameter(
                    ParameterBuilder::new().name(name).parameter_in(ParameterIn::Path).required(Required::True),
                );
            }
        }
        for (_, name, description) in QUERY_PARAMS.iter().filter(|(p, _, _)| p == path) {
            op = op.parameter(
                ParameterBuilder::new()
                    .name(*name)
                    .parameter_in(ParameterIn::Query)
                    .required(Required::False)
                    .description(Some(*description)),
            );
        }
        if let Some(r) = req {
            op = op.request_body(Some(RequestBodyBuilder::new().content(mime(r), content(r)).build()));
        }
        let mut ok = ResponseBuilder::new().description("success");
        if let Some(r) = resp {
            ok = ok.content(mime(r), content(r));
        }
        let err = ResponseBuilder::new().description("error").content("application/json", content("ErrorBody")).build();
        op = op.response(*status, ok.build()).response("4XX", err);
        if *path != "/api/v1/auth/login" && *path != "/api/v1/info" {
            op = op.security(SecurityRequirement::new("bearer", Vec::<String>::new()));
        }
        doc.paths.add_path_operation(path, vec![method.clone()], op.build());
    }
    doc
}

pub async fn serve() -> impl IntoResponse {
    axum::Json(document())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_change_feed_is_described_with_its_parameters() {
        let doc = serde_json::to_value(document()).unwrap_or_default();
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
        for schema in ["Change", "ChangeList", "ChangeOp"] {
            assert!(doc["components"]["schemas"][schema].is_object(), "{schema} missing");
        }
    }
}
