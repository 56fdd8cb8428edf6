#!/usr/bin/env python3
"""helm.py - a small Helm v4 CLI over PyPI's ``helm-python-sdk`` (import ``helm_python``).

No ``helm`` binary, Go toolchain or network is needed: the SDK wheel bundles
``libhelm_c.so`` (Helm v4's Go SDK behind a C ABI) and this script drives it
through ctypes.  Only the SDK and the Python standard library are used (YAML
values files are parsed by Helm's own YAML parser inside the SDK).

Subcommands (flags follow the real helm CLI where possible):

  lint      CHART... [--strict] [--quiet] [--with-subcharts] [-f FILE]... [--set K=V]...
  template  CHART --name REL [--namespace NS] [-f FILE]... [--set K=V]... [--include-crds]
            [--no-hooks] [--skip-tests] [--kube-version V] [--api-versions G/V]...
  install   CHART --name REL --namespace NS [--create-namespace] [--kubeconfig PATH]
            [-f FILE]... [--set K=V]... [--wait [STRATEGY]] [--timeout 5m] [--dry-run [client|server]]
  upgrade   CHART --name REL --namespace NS [--install] [--create-namespace] ... (as install)
  uninstall --name REL --namespace NS [--kubeconfig PATH] [--keep-history] [--ignore-not-found]
  status    --name REL --namespace NS [--kubeconfig PATH] [--show-manifest] [-o json]
  list      [--namespace NS | -A] [--all] [--filter REGEX] [-o json]

Errors print Helm's own message as ``Error: <message>`` on stderr and exit 1.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any

try:
    import helm_python as helm
except ImportError as exc:  # pragma: no cover
    sys.stderr.write(f"Error: helm-python-sdk is not installed ({exc}); run: pip install helm-python-sdk\n")
    sys.exit(1)

try:  # private, but it is exactly what Config.install/upgrade call internally
    from helm_python import _native
except ImportError:  # pragma: no cover
    _native = None


class CliError(Exception):
    """A usage error detected on the Python side."""


# --------------------------------------------------------------------------
# values: -f / --set / --set-string / --set-json / --set-file / --set-literal
# --------------------------------------------------------------------------

def _merge_maps(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Helm's mergeMaps: nested maps merge recursively, anything else replaces."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge_maps(out[key], value)
        else:
            out[key] = value
    return out


def _read_values_file(path: str) -> dict[str, Any]:
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
    except OSError as exc:
        raise CliError(f"open {path}: {exc.strerror or exc}") from exc
    if not text.strip():
        return {}
    try:
        return helm.values_from_yaml(text) or {}
    except helm.HelmError as exc:
        raise CliError(f"failed to parse {path}: {exc}") from exc


def collect_values(args: argparse.Namespace) -> dict[str, Any]:
    """Merge user values in the same order as helm's values.Options.MergeValues."""
    values: dict[str, Any] = {}
    for path in getattr(args, "values", None) or []:
        values = _merge_maps(values, _read_values_file(path))
    parsers = (
        ("set_json", helm.parse_set_json, "--set-json"),
        ("set", helm.parse_set_string, "--set"),
        ("set_string", helm.parse_set_string_values, "--set-string"),
        ("set_file", helm.parse_set_file, "--set-file"),
        ("set_literal", helm.parse_set_literal, "--set-literal"),
    )
    for attr, parse, flag in parsers:
        for expr in getattr(args, attr, None) or []:
            try:
                values = _merge_maps(values, parse(expr))
            except helm.HelmError as exc:
                raise CliError(f"failed parsing {flag} data: {exc}") from exc
    return values


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)")


def parse_timeout(text: str | None) -> int | None:
    """'300', '300s', '5m', '1h30m' -> seconds."""
    if text is None:
        return None
    text = text.strip()
    if text.isdigit():
        return int(text)
    pos, total = 0, 0.0
    for match in _DURATION.finditer(text):
        if match.start() != pos:
            break
        number, unit = float(match.group(1)), match.group(2)
        total += number * {"h": 3600, "m": 60, "s": 1, "ms": 0.001}[unit]
        pos = match.end()
    if pos != len(text) or pos == 0:
        raise CliError(f'invalid argument "{text}" for "--timeout" flag: time: invalid duration "{text}"')
    return max(1, int(round(total)))


def make_config(args: argparse.Namespace, *, storage_driver: str | None = None) -> "helm.Config":
    """Cluster connection: --kubeconfig, else $KUBECONFIG, else ~/.kube/config."""
    return helm.Config(
        kubeconfig_path=getattr(args, "kubeconfig", None),
        kube_context=getattr(args, "kube_context", None),
        kube_insecure_skip_tls_verify=bool(getattr(args, "kube_insecure_skip_tls_verify", False)),
        namespace=getattr(args, "namespace", None),
        storage_driver=storage_driver or getattr(args, "storage_driver", None),
    )


def release_call(cfg: "helm.Config", func: str, chart: str, name: str,
                 values: dict[str, Any] | None, opts: dict[str, Any]) -> dict[str, Any]:
    """Call helm_install / helm_upgrade with the full option set of libhelm_c.

    This is what ``Config.install``/``Config.upgrade`` do internally; going
    through it directly exposes options that libhelm_c 0.2.2 accepts but the
    0.2.2 Python wrapper does not surface (skip_crds, disable_hooks,
    kube_version, api_versions, server_side_apply, take_ownership, ...).
    Falls back to the public methods when the private module is unavailable.
    """
    # Unset flags are omitted; an explicit False is kept only for server_side_apply.
    opts = {k: v for k, v in opts.items()
            if v is not None and (v is not False or k == "server_side_apply")}
    if _native is not None and hasattr(cfg, "_raw"):
        payload = _native.call_string(
            func, cfg._raw(), _native.HANDLE(0), _native.HANDLE(0), chart, name,
            None if values is None else json.dumps(values),
            json.dumps(opts) if opts else None,
        )
        return json.loads(payload)
    # Public-API fallback: only the keys the wrapper knows.
    public = {"namespace": "namespace", "timeout_seconds": "timeout", "wait": "wait",
              "dry_run": "dry_run", "create_namespace": "create_namespace",
              "rollback_on_failure": "rollback_on_failure", "description": "description",
              "labels": "labels", "chart_repo_url": "chart_repo_url",
              "chart_version": "chart_version", "plain_http": "plain_http",
              "max_history": "max_history", "reset_values": "reset_values",
              "reuse_values": "reuse_values", "cleanup_on_fail": "cleanup_on_fail"}
    unknown = sorted(set(opts) - set(public))
    if unknown:
        raise CliError(f"options {unknown} need helm_python._native, which is unavailable")
    kwargs = {public[k]: v for k, v in opts.items()}
    method = cfg.install if func == "helm_install" else cfg.upgrade
    return method(chart, name, values, **kwargs)


def print_release(rel: dict[str, Any], output: str | None, *, show_manifest: bool = False) -> None:
    if output == "json":
        print(json.dumps(rel, indent=2))
        return
    if output == "yaml":
        print(yaml_dump(rel))
        return
    print(f"NAME: {rel.get('name', '')}")
    if rel.get("deployed_at"):
        print(f"LAST DEPLOYED: {rel['deployed_at']}")
    print(f"NAMESPACE: {rel.get('namespace', '')}")
    print(f"STATUS: {rel.get('status', '')}")
    print(f"REVISION: {rel.get('revision', '')}")
    if rel.get("chart_name"):
        print(f"CHART: {rel['chart_name']}-{rel.get('chart_version', '')}")
    if rel.get("app_version"):
        print(f"APP VERSION: {rel['app_version']}")
    if show_manifest and rel.get("manifest"):
        print("MANIFEST:")
        print(rel["manifest"].strip())
    if rel.get("notes"):
        print("NOTES:")
        print(rel["notes"].rstrip("\n"))


def yaml_dump(obj: Any) -> str:
    """JSON is valid YAML; keep the tool free of PyYAML."""
    return json.dumps(obj, indent=2)


# --------------------------------------------------------------------------
# template
# --------------------------------------------------------------------------

# Helm's releaseutil InstallOrder (kind_sorter.go), used to order hooks.
INSTALL_ORDER = [
    "PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange",
    "PodSecurityPolicy", "PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList",
    "ConfigMap", "StorageClass", "PersistentVolume", "PersistentVolumeClaim",
    "CustomResourceDefinition", "ClusterRole", "ClusterRoleList", "ClusterRoleBinding",
    "ClusterRoleBindingList", "Role", "RoleList", "RoleBinding", "RoleBindingList",
    "Service", "DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment",
    "HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress",
    "APIService", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
]
_ORDER = {kind: i for i, kind in enumerate(INSTALL_ORDER)}
_DOC_SEP = re.compile(r"(?:^|\s*\n)---\s*")
_HOOK_ANN = "helm.sh/hook"


def _split_manifests(text: str) -> list[str]:
    """releaseutil.SplitManifests."""
    return [d.strip() for d in _DOC_SEP.split(text.strip()) if d.strip()]


def _hooks_from_render(rendered: dict[str, str], skip_tests: bool) -> list[tuple[str, str]]:
    """(path, manifest) for every hook document, in Helm's order.

    libhelm_c's dry-run install returns only the non-hook manifest, so hooks
    are recovered from the offline engine render (same values, same engine)
    and ordered like releaseutil.SortManifests/sortHooksByKind.
    """
    hooks: list[tuple[int, str, str, str]] = []  # (seq, kind, path, manifest)
    seq = 0
    for path in sorted(rendered):
        base = os.path.basename(path)
        if base.startswith("_") or path.endswith("NOTES.txt"):
            continue
        for doc in _split_manifests(rendered[path]):
            if _HOOK_ANN not in doc:
                continue
            try:
                head = helm.values_from_yaml(doc) or {}
            except helm.HelmError:
                continue
            annotations = ((head.get("metadata") or {}).get("annotations") or {})
            hook_types = annotations.get(_HOOK_ANN)
            if hook_types is None:
                continue
            if skip_tests and "test" in [t.strip() for t in str(hook_types).split(",")]:
                continue
            hooks.append((seq, str(head.get("kind", "")), path, doc))
            seq += 1

    def key(item: tuple[int, str, str, str]) -> tuple[int, str, int]:
        seq_, kind, _, _ = item
        if kind in _ORDER:
            return (0, "", _ORDER[kind] * 10**9 + seq_)
        return (1, kind, seq_)

    return [(p, m) for _, _, p, m in sorted(hooks, key=key)]


def cmd_template(args: argparse.Namespace) -> int:
    values = collect_values(args)
    name = args.name or args.release or "release-name"
    namespace = args.namespace or "default"
    opts: dict[str, Any] = {
        "dry_run": "client",          # helm template == client-only dry-run install
        "replace": True,              # as helm template does
        "namespace": namespace,
        "kube_version": args.kube_version,
        "api_versions": args.api_versions or None,
        "skip_schema_validation": args.skip_schema_validation,
        "disable_hooks": args.no_hooks,
        "chart_repo_url": args.repo,
        "chart_version": args.version,
        "dependency_update": args.dependency_update,
    }
    # Memory storage + no kubeconfig: nothing on a cluster is read or written.
    with helm.Config(namespace=namespace, storage_driver="memory") as cfg:
        rel = release_call(cfg, "helm_install", args.chart, name, values, opts)

    manifest = rel.get("manifest", "") or ""
    hooks: list[tuple[str, str]] = []
    crds_text = ""
    local = os.path.exists(args.chart)
    if local and (args.include_crds or not args.no_hooks):
        with helm.Chart.load(args.chart) as chart:
            if args.include_crds:
                for crd in chart.crds:
                    crds_text += f"---\n# Source: {crd['filename']}\n{crd['data']}\n"
            if not args.no_hooks:
                rendered = chart.render(values, name=name, namespace=namespace)
                hooks = _hooks_from_render(rendered, args.skip_tests)
    elif not local and args.include_crds:
        sys.stderr.write("WARNING: --include-crds/hooks are only added for local chart paths\n")

    out = (crds_text + manifest).strip() + "\n"
    for path, doc in hooks:
        out += f"---\n# Source: {path}\n{doc}\n"
    if out.strip() == "":
        return 0
    sys.stdout.write(out)
    return 0


# --------------------------------------------------------------------------
# lint
# --------------------------------------------------------------------------

SEVERITY = ["UNKNOWN", "INFO", "WARNING", "ERROR"]


def cmd_lint(args: argparse.Namespace) -> int:
    values = collect_values(args)
    failed = 0
    warn_or_err = 0
    message = []
    for path in args.charts:
        report = helm.lint(
            path, values or None,
            strict=args.strict or None,
            namespace=args.namespace,
            with_subcharts=args.with_subcharts or None,
            quiet=args.quiet or None,
            skip_schema_validation=args.skip_schema_validation or None,
            kube_version=args.kube_version,
        )
        msgs = report.get("messages") or []
        errors = report.get("errors") or []
        has_issue = any(m.get("severity", 0) > 1 for m in msgs) or bool(errors)
        warn_or_err += has_issue
        if errors:
            failed += 1
        if args.quiet and not has_issue:
            continue
        message.append(f"==> Linting {path}")
        if not msgs:
            message.extend(f"Error {e}" for e in errors)
        for m in msgs:
            sev = m.get("severity", 0)
            if not args.quiet or sev > 1:
                label = SEVERITY[sev] if 0 <= sev < len(SEVERITY) else str(sev)
                message.append(f"[{label}] {m.get('path', '')}: {m.get('error', '')}".rstrip())
        message.append("")
    if message:
        print("\n".join(message))
    summary = f"{len(args.charts)} chart(s) linted, {failed} chart(s) failed"
    if failed:
        sys.stderr.write(f"Error: {summary}\n")
        return 1
    if not args.quiet or warn_or_err:
        print(summary)
    return 0


# --------------------------------------------------------------------------
# release actions
# --------------------------------------------------------------------------

def _wait(args: argparse.Namespace) -> str | None:
    return args.wait  # None | "watcher" | "legacy" | "hookOnly"


def _labels(args: argparse.Namespace) -> dict[str, str] | None:
    if not args.labels:
        return None
    out: dict[str, str] = {}
    for item in args.labels:
        for pair in item.split(","):
            if "=" not in pair:
                raise CliError(f"invalid label {pair!r}, expected key=value")
            k, v = pair.split("=", 1)
            out[k] = v
    return out


def _common_release_opts(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "namespace": args.namespace,
        "timeout_seconds": parse_timeout(args.timeout),
        "wait": _wait(args),
        "wait_for_jobs": args.wait_for_jobs,
        "dry_run": args.dry_run,
        "rollback_on_failure": args.rollback_on_failure,
        "description": args.description,
        "labels": _labels(args),
        "chart_repo_url": args.repo,
        "chart_version": args.version,
        "plain_http": args.plain_http,
        "skip_crds": args.skip_crds,
        "disable_hooks": args.no_hooks,
        "take_ownership": args.take_ownership,
        "force_replace": args.force_replace,
        "skip_schema_validation": args.skip_schema_validation,
        "disable_openapi_validation": args.disable_openapi_validation,
        "dependency_update": args.dependency_update,
    }


def _do_install(cfg: "helm.Config", args: argparse.Namespace, values: dict[str, Any]) -> dict[str, Any]:
    opts = _common_release_opts(args)
    opts["create_namespace"] = args.create_namespace
    if args.server_side is not None:
        opts["server_side_apply"] = args.server_side != "false"
    return release_call(cfg, "helm_install", args.chart, args.name, values, opts)


def cmd_install(args: argparse.Namespace) -> int:
    values = collect_values(args)
    helm.validate_release_name(args.name)
    with make_config(args) as cfg:
        rel = _do_install(cfg, args, values)
    print_release(rel, args.output)
    return 0


def cmd_upgrade(args: argparse.Namespace) -> int:
    values = collect_values(args)
    helm.validate_release_name(args.name)
    with make_config(args) as cfg:
        if args.install:
            # like `helm upgrade --install`: install when no history exists
            try:
                history = cfg.history(args.name, max_revisions=1)
            except helm.HelmNotFoundError:
                history = []
            if not history:
                rel = _do_install(cfg, args, values)
                print_release(rel, args.output)
                return 0
        opts = _common_release_opts(args)
        opts.update({
            "max_history": args.history_max,
            "reset_values": args.reset_values,
            "reuse_values": args.reuse_values,
            "reset_then_reuse_values": args.reset_then_reuse_values,
            "cleanup_on_fail": args.cleanup_on_fail,
        })
        if args.server_side is not None:
            opts["server_side_apply"] = args.server_side  # "true" | "false" | "auto"
        rel = release_call(cfg, "helm_upgrade", args.chart, args.name, values, opts)
    print_release(rel, args.output)
    return 0


def cmd_uninstall(args: argparse.Namespace) -> int:
    with make_config(args) as cfg:
        res = cfg.uninstall(
            args.name,
            keep_history=args.keep_history,
            timeout=parse_timeout(args.timeout),
            dry_run=args.dry_run,
            ignore_not_found=args.ignore_not_found,
            wait=_wait(args),
            description=args.description,
        )
    if args.output == "json":
        print(json.dumps(res, indent=2))
    else:
        if res.get("info"):
            print(res["info"])
        if not res.get("release") and args.ignore_not_found:
            print(f'release "{args.name}" not found, ignoring')
        else:
            print(f'release "{args.name}" uninstalled')
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    with make_config(args) as cfg:
        rel = cfg.status(args.name, revision=args.revision)
    print_release(rel, args.output, show_manifest=args.show_manifest)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    with make_config(args) as cfg:
        rels = cfg.list(all_states=args.all, all_namespaces=args.all_namespaces,
                        name_filter=args.filter)
    if args.output == "json":
        print(json.dumps(rels, indent=2))
        return 0
    rows = [["NAME", "NAMESPACE", "REVISION", "UPDATED", "STATUS", "CHART", "APP VERSION"]]
    for r in rels:
        rows.append([r.get("name", ""), r.get("namespace", ""), str(r.get("revision", "")),
                     r.get("deployed_at", ""), r.get("status", ""),
                     f"{r.get('chart_name', '')}-{r.get('chart_version', '')}", r.get("app_version", "")])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("\t".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    return 0


def cmd_version(args: argparse.Namespace) -> int:
    print(f"helm-python-sdk {helm.__version__}, libhelm_c {helm.helm_c_version()}, "
          f"Helm SDK {helm.helm_sdk_version()}")
    return 0


# --------------------------------------------------------------------------
# argument parsing
# --------------------------------------------------------------------------

def _add_values(p: argparse.ArgumentParser) -> None:
    p.add_argument("-f", "--values", action="append", default=[], metavar="FILE",
                   help="values YAML file (repeatable; '-' = stdin)")
    p.add_argument("--set", action="append", default=[], metavar="K=V")
    p.add_argument("--set-string", action="append", default=[], metavar="K=V")
    p.add_argument("--set-json", action="append", default=[], metavar="K=JSON")
    p.add_argument("--set-file", action="append", default=[], metavar="K=PATH")
    p.add_argument("--set-literal", action="append", default=[], metavar="K=V")


def _add_kube(p: argparse.ArgumentParser, *, ns_required: bool = True) -> None:
    p.add_argument("-n", "--namespace", required=ns_required, default=None)
    p.add_argument("--kubeconfig", default=None, help="kubeconfig path (default $KUBECONFIG, ~/.kube/config)")
    p.add_argument("--kube-context", default=None)
    p.add_argument("--kube-insecure-skip-tls-verify", action="store_true")
    p.add_argument("--storage-driver", default=None, choices=["secret", "configmap", "memory", "sql"])


def _add_release_name(p: argparse.ArgumentParser) -> None:
    p.add_argument("--name", required=True, help="release name")


def _add_install_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("chart", help="chart path, .tgz, oci:// URL, or name with --repo")
    _add_release_name(p)
    _add_kube(p)
    _add_values(p)
    p.add_argument("--create-namespace", action="store_true")
    p.add_argument("--wait", nargs="?", const="watcher", default=None,
                   choices=["watcher", "legacy", "hookOnly"],
                   help="wait for resources (bare --wait = watcher)")
    p.add_argument("--wait-for-jobs", action="store_true")
    p.add_argument("--timeout", default=None, help="e.g. 300, 300s, 5m")
    p.add_argument("--dry-run", nargs="?", const="client", default=None,
                   choices=["client", "server", "none"])
    p.add_argument("--rollback-on-failure", "--atomic", action="store_true")
    p.add_argument("--description", default=None)
    p.add_argument("--labels", action="append", default=[], metavar="K=V[,K=V]")
    p.add_argument("--repo", default=None, help="chart repository URL")
    p.add_argument("--version", default=None, help="chart version constraint")
    p.add_argument("--plain-http", action="store_true")
    p.add_argument("--skip-crds", action="store_true")
    p.add_argument("--no-hooks", action="store_true")
    p.add_argument("--take-ownership", action="store_true")
    p.add_argument("--force-replace", action="store_true")
    p.add_argument("--skip-schema-validation", action="store_true")
    p.add_argument("--disable-openapi-validation", action="store_true")
    p.add_argument("--dependency-update", action="store_true")
    p.add_argument("-o", "--output", choices=["table", "json"], default=None)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="helm.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--debug", action="store_true", help="route libhelm_c logs to stderr")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("lint", help="examine charts for possible issues")
    p.add_argument("charts", nargs="+", metavar="CHART")
    p.add_argument("--strict", action="store_true", help="fail on lint warnings")
    p.add_argument("--quiet", action="store_true", help="print only warnings and errors")
    p.add_argument("--with-subcharts", action="store_true")
    p.add_argument("--skip-schema-validation", action="store_true")
    p.add_argument("--kube-version", default=None)
    p.add_argument("-n", "--namespace", default=None)
    _add_values(p)
    p.set_defaults(func=cmd_lint)

    p = sub.add_parser("template", help="render chart templates locally")
    p.add_argument("chart")
    p.add_argument("release", nargs="?", default=None, help="(alternative to --name)")
    p.add_argument("--name", default=None)
    p.add_argument("-n", "--namespace", default=None)
    _add_values(p)
    p.add_argument("--include-crds", action="store_true", help="include crds/ in the output")
    p.add_argument("--no-hooks", action="store_true")
    p.add_argument("--skip-tests", action="store_true")
    p.add_argument("--skip-schema-validation", action="store_true")
    p.add_argument("--kube-version", default=None)
    p.add_argument("-a", "--api-versions", action="append", default=[])
    p.add_argument("--repo", default=None)
    p.add_argument("--version", default=None)
    p.add_argument("--dependency-update", action="store_true")
    p.set_defaults(func=cmd_template)

    p = sub.add_parser("install", help="install a chart")
    _add_install_common(p)
    p.add_argument("--server-side", choices=["true", "false"], default=None)
    p.set_defaults(func=cmd_install)

    p = sub.add_parser("upgrade", help="upgrade a release")
    _add_install_common(p)
    p.add_argument("-i", "--install", action="store_true")
    p.add_argument("--server-side", choices=["true", "false", "auto"], default=None)
    p.add_argument("--history-max", type=int, default=None)
    p.add_argument("--reset-values", action="store_true")
    p.add_argument("--reuse-values", action="store_true")
    p.add_argument("--reset-then-reuse-values", action="store_true")
    p.add_argument("--cleanup-on-fail", action="store_true")
    p.set_defaults(func=cmd_upgrade)

    p = sub.add_parser("uninstall", help="uninstall a release")
    _add_release_name(p)
    _add_kube(p)
    p.add_argument("--keep-history", action="store_true")
    p.add_argument("--ignore-not-found", action="store_true")
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--wait", nargs="?", const="watcher", default=None,
                   choices=["watcher", "legacy", "hookOnly"])
    p.add_argument("--timeout", default=None)
    p.add_argument("--description", default=None)
    p.add_argument("-o", "--output", choices=["table", "json"], default=None)
    p.set_defaults(func=cmd_uninstall)

    p = sub.add_parser("status", help="show a release")
    _add_release_name(p)
    _add_kube(p)
    p.add_argument("--revision", type=int, default=None)
    p.add_argument("--show-manifest", action="store_true")
    p.add_argument("-o", "--output", choices=["table", "json"], default=None)
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("list", help="list releases")
    _add_kube(p, ns_required=False)
    p.add_argument("-A", "--all-namespaces", action="store_true")
    p.add_argument("-a", "--all", action="store_true", help="all states")
    p.add_argument("--filter", default=None)
    p.add_argument("-o", "--output", choices=["table", "json"], default=None)
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("version", help="print SDK / Helm versions")
    p.set_defaults(func=cmd_version)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.debug:
        import logging
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
        helm.enable_logging(logging.DEBUG)
    try:
        return args.func(args)
    except helm.HelmError as exc:
        msg = str(exc).rstrip("\n")
        sys.stderr.write(f"Error: {msg}\n")
        return 1
    except CliError as exc:
        sys.stderr.write(f"Error: {exc}\n")
        return 1
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
