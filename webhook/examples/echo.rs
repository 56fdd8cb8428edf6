//! The throughput anchor's echo servers (`bench/webhook/run.sh`): what the webhook is measured
//! beside, as a user would write a webhook without it.
//!
//! - bare (the default): axum over rustls; `POST /validate` reads the whole body and answers a
//!   fixed `AdmissionReview` that allows. TLS, HTTP/1.1, tokio and the body read, nothing more:
//!   the ceiling of any webhook on this stack.
//! - `--parse`: the same, but the body is decoded into kube's `AdmissionReview<DynamicObject>`
//!   and the answer is kube's `AdmissionResponse` for that request (allowed), encoded by
//!   serde_json: a webhook written with kube's admission types that decides nothing.
//!
//! ```sh
//! cargo build --release -p miggate-webhook --example echo
//! target/release/examples/echo --cert tls.crt --key tls.key --listen 127.0.0.1:18443 [--parse]
//! ```
//!
//! The certificate and key are PEM files (any pair rustls reads, such as `openssl req -x509`
//! makes). The server runs on tokio's multi-thread runtime with its default workers (one per
//! core), as `miggate webhook` does, until it is killed. A measurement tool, not a test.

#![allow(clippy::expect_used, clippy::print_stderr)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use axum::Router;
use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum_server::tls_rustls::RustlsConfig;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};

/// The bare echo's answer: an allowing review, the size of a short real one.
const FIXED: &str = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"00000000-0000-0000-0000-000000000000","allowed":true}}"#;

const USAGE: &str = "usage: echo --cert PATH --key PATH [--listen ADDR] [--parse]";

struct Args {
    listen: SocketAddr,
    cert: PathBuf,
    key: PathBuf,
    parse: bool,
}

fn args() -> Result<Args, String> {
    let mut listen: SocketAddr = "127.0.0.1:18443".parse().map_err(|e| format!("{e}"))?;
    let (mut cert, mut key, mut parse) = (None, None, false);
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--parse" => parse = true,
            "--listen" | "--cert" | "--key" => {
                let v = it.next().ok_or_else(|| format!("{a} needs a value"))?;
                match a.as_str() {
                    "--listen" => listen = v.parse().map_err(|e| format!("--listen {v}: {e}"))?,
                    "--cert" => cert = Some(PathBuf::from(v)),
                    _ => key = Some(PathBuf::from(v)),
                }
            }
            _ => return Err(format!("unknown argument {a}")),
        }
    }
    Ok(Args {
        listen,
        cert: cert.ok_or("--cert is required")?,
        key: key.ok_or("--key is required")?,
        parse,
    })
}

async fn bare(_body: Bytes) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], FIXED).into_response()
}

/// What a webhook on kube's admission types does before it decides anything: read the review,
/// take its request, and write kube's response.
async fn parse(body: Bytes) -> Response {
    let review: AdmissionReview<DynamicObject> = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    };
    let request: AdmissionRequest<DynamicObject> = match review.try_into() {
        Ok(r) => r,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("{e}")).into_response(),
    };
    match serde_json::to_vec(&AdmissionResponse::from(&request).into_review()) {
        Ok(out) => ([(header::CONTENT_TYPE, "application/json")], out).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

fn main() -> ExitCode {
    let args = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("echo: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async move {
        let tls = match RustlsConfig::from_pem_file(&args.cert, &args.key).await {
            Ok(t) => t,
            Err(e) => {
                eprintln!("echo: {} and {}: {e}", args.cert.display(), args.key.display());
                return ExitCode::from(2);
            }
        };
        let app = if args.parse {
            Router::new().route("/validate", post(parse))
        } else {
            Router::new().route("/validate", post(bare))
        };
        eprintln!(
            "echo ({}) listening on https://{}/validate",
            if args.parse { "kube types" } else { "bare" },
            args.listen
        );
        match axum_server::bind_rustls(args.listen, tls)
            .serve(app.into_make_service())
            .await
        {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("echo: {}: {e}", args.listen);
                ExitCode::from(2)
            }
        }
    })
}
