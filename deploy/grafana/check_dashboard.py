#!/usr/bin/env python3
"""Checks that the Grafana dashboard and the alerting rules use only catalogued metrics.

The catalog is the metric tables of deploy/prometheus/README.md. For every PromQL expression
of the dashboard (panel targets and template variables) and of deploy/prometheus/alerts.yml:

- every `switchboard_…` / `process_…` name is a catalogued metric, or a histogram's
  `_bucket`, `_sum` or `_count` series (a bare histogram name has no series, so it fails);
- label names inside a selector `{…}` are that metric's catalogued labels, or `job`,
  `instance` (added by Prometheus), `le` (on `_bucket`);
- label names in `by`, `without`, `on`, `ignoring`, `group_left` and `group_right` are
  catalogued labels of some metric, or `job`, `instance`, `le`.

With --promtool, the dashboard's expressions (Grafana's variables replaced by plain values)
are also parsed by `promtool check rules`, so a syntax error fails too. It also checks the
dashboard's frame: schemaVersion 39, the DS_PROMETHEUS data source variable, the `group`
variable, every panel and target on that data source, unique panel ids.

Standard library only (no PyYAML): alerts.yml is read line by line for its `expr:` values.
Prints what it checked; exits 1 on any failure.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

NAME = re.compile(r"\b(?:switchboard|process)_[A-Za-z0-9_]*")
SELECTOR = re.compile(r"\b((?:switchboard|process)_[A-Za-z0-9_]*)\s*\{([^}]*)\}")
MATCHER = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)")
GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
PROMETHEUS_LABELS = {"job", "instance"}
# Grafana's built-in variables and ours, as plain values for promtool.
GRAFANA_VARIABLES = {
    "$__rate_interval": "1m",
    "$__interval": "1m",
    "$__range": "1h",
    "$group": ".*",
}


def read_catalog(path):
    """{name: (type, {labels})} from the README's `| metric | type | labels | meaning |` tables."""
    catalog = {}
    in_table = False
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")] if line.startswith("|") else None
            if cells is None:
                in_table = False
                continue
            if [cell.lower() for cell in cells[:3]] == ["metric", "type", "labels"]:
                in_table = True
                continue
            if not in_table or set(cells[0]) <= set("-: "):
                continue
            match = re.fullmatch(r"`([A-Za-z_:][A-Za-z0-9_:]*)`", cells[0])
            if not match:
                raise SystemExit(f"catalog: cannot read the metric cell {cells[0]!r} in {path}")
            kind = cells[1].split()[0] if cells[1] else ""
            labels = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", cells[2]))
            catalog[match.group(1)] = (kind, labels)
    if not catalog:
        raise SystemExit(f"catalog: no metric table found in {path}")
    return catalog


def alert_expressions(path):
    """(where, expr) of every rule in alerts.yml: `expr: text` or `expr: |` blocks."""
    found = []
    rules = 0
    current = "?"
    lines = open(path, encoding="utf-8").read().splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        rule = re.match(r"\s*-\s*(alert|record):\s*(\S+)", line)
        if rule:
            rules += 1
            current = rule.group(2)
        match = re.match(r"(\s*)expr:\s*(.*)$", line)
        if match:
            indent, rest = len(match.group(1)), match.group(2).strip()
            if rest and rest[0] in "|>":
                body = []
                index += 1
                while index < len(lines) and (not lines[index].strip() or len(lines[index]) - len(lines[index].lstrip()) > indent):
                    body.append(lines[index].strip())
                    index += 1
                found.append((f"alerts.yml {current}", "\n".join(body).strip()))
                continue
            if rest[:1] in "'\"":
                rest = rest[1:-1]
            found.append((f"alerts.yml {current}", rest))
        index += 1
    if rules == 0 or len(found) != rules:
        raise SystemExit(f"alerts: read {len(found)} expressions for {rules} rules in {path}")
    return found


def dashboard_expressions(dashboard, problems):
    """(where, expr) of every panel target (rows' panels too) and every query variable."""
    found = []
    panel_ids = []

    def walk(panels):
        for panel in panels:
            panel_ids.append(panel.get("id"))
            title = panel.get("title", "?")
            if panel.get("type") != "row":
                if panel.get("datasource") != {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}:
                    problems.append(f"panel {title!r}: datasource is not the DS_PROMETHEUS variable")
                if not panel.get("targets"):
                    problems.append(f"panel {title!r}: no targets")
            for target in panel.get("targets", []):
                if target.get("datasource") != {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}:
                    problems.append(f"panel {title!r} target {target.get('refId')}: datasource is not DS_PROMETHEUS")
                if not target.get("expr", "").strip():
                    problems.append(f"panel {title!r} target {target.get('refId')}: no expr")
                    continue
                found.append((f"panel {title!r} {target.get('refId')}", target["expr"]))
            walk(panel.get("panels", []))

    walk(dashboard.get("panels", []))
    if len(panel_ids) != len(set(panel_ids)) or None in panel_ids:
        problems.append("panel ids are missing or not unique")
    variables = {v.get("name"): v for v in dashboard.get("templating", {}).get("list", [])}
    source = variables.get("DS_PROMETHEUS")
    if not source or source.get("type") != "datasource" or source.get("query") != "prometheus":
        problems.append("no DS_PROMETHEUS variable of type datasource for prometheus")
    group = variables.get("group")
    group_query = group and group.get("query")
    if isinstance(group_query, dict):
        group_query = group_query.get("query")
    if not group or group_query != "label_values(switchboard_group_lag, group)":
        problems.append("no `group` variable from label_values(switchboard_group_lag, group)")
    for name, variable in variables.items():
        if variable.get("type") != "query":
            continue
        query = variable.get("query")
        query = query.get("query") if isinstance(query, dict) else query
        found.append((f"variable {name}", query or ""))
    if dashboard.get("schemaVersion") != 39:
        problems.append(f"schemaVersion is {dashboard.get('schemaVersion')}, not 39")
    return found, len(panel_ids)


def check_names(where, expr, catalog, all_labels, problems):
    """The metric names of one expression; appends what is wrong to problems."""
    names = set()
    for raw in NAME.findall(expr):
        name = raw
        if name not in catalog:
            for suffix in HISTOGRAM_SUFFIXES:
                base = raw[: -len(suffix)]
                if raw.endswith(suffix) and catalog.get(base, ("",))[0] == "histogram":
                    name = base
                    break
        if name not in catalog:
            problems.append(f"{where}: `{raw}` is not in the catalog")
        elif catalog[name][0] == "histogram" and name == raw:
            problems.append(f"{where}: `{raw}` is a histogram: use its _bucket, _sum or _count")
        names.add(name)
    for raw, matchers in SELECTOR.findall(expr):
        base = raw
        for suffix in HISTOGRAM_SUFFIXES:
            if raw.endswith(suffix) and raw[: -len(suffix)] in catalog:
                base = raw[: -len(suffix)]
        if base not in catalog:
            continue
        allowed = catalog[base][1] | PROMETHEUS_LABELS | ({"le"} if raw.endswith("_bucket") else set())
        for label in MATCHER.findall(matchers):
            if label not in allowed:
                problems.append(f"{where}: `{raw}` has no label `{label}`")
    for grouping in GROUPING.findall(expr):
        for label in (part.strip() for part in grouping.split(",")):
            if label and label not in all_labels:
                problems.append(f"{where}: no catalogued metric has the label `{label}`")
    return names


def promtool_parse(promtool, expressions, problems):
    """Parses the dashboard's expressions as recording rules with promtool."""
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "dashboard_rules.yml")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write("groups:\n  - name: dashboard\n    rules:\n")
            for number, (_, expr) in enumerate(expressions):
                # Grafana's label_values(metric, label): promtool parses the selector.
                expr = re.sub(r"^\s*label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*$", r"\1", expr)
                for variable, value in sorted(GRAFANA_VARIABLES.items(), key=lambda item: -len(item[0])):
                    expr = expr.replace(variable, value)
                if "$" in expr:
                    problems.append(f"promtool: an unknown Grafana variable is left in {expr!r}")
                handle.write(f"      - record: dashboard:expr_{number}\n        expr: {json.dumps(expr)}\n")
        result = subprocess.run([promtool, "check", "rules", path], capture_output=True, text=True)
        if result.returncode != 0:
            problems.append("promtool cannot parse the dashboard's expressions:\n" + result.stdout + result.stderr)
        return result.returncode == 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--catalog", default=os.path.join(ROOT, "deploy/prometheus/README.md"))
    parser.add_argument("--dashboard", default=os.path.join(HERE, "switchboard.json"))
    parser.add_argument("--alerts", default=os.path.join(ROOT, "deploy/prometheus/alerts.yml"))
    parser.add_argument("--promtool", help="promtool to parse the dashboard's expressions with")
    options = parser.parse_args()

    catalog = read_catalog(options.catalog)
    all_labels = set().union(*(labels for _, labels in catalog.values())) | PROMETHEUS_LABELS | {"le"}
    print(f"catalog: {len(catalog)} metrics in {os.path.relpath(options.catalog, ROOT)}")

    failed = False
    for label, path in (("dashboard", options.dashboard), ("alerts", options.alerts)):
        problems = []
        if label == "dashboard":
            with open(path, encoding="utf-8") as handle:
                dashboard = json.load(handle)
            expressions, panels = dashboard_expressions(dashboard, problems)
            what = f"{panels} panels, {len(expressions)} expressions"
        else:
            expressions = alert_expressions(path)
            what = f"{len(expressions)} rules"
        used = set()
        for where, expr in expressions:
            used |= check_names(where, expr, catalog, all_labels, problems)
        if label == "dashboard" and options.promtool:
            if promtool_parse(options.promtool, expressions, problems):
                what += ", all parsed by promtool"
        name = os.path.relpath(path, ROOT)
        if problems:
            failed = True
            print(f"{label}: FAILED: {name} ({what})")
            for problem in problems:
                print(f"  {problem}")
        else:
            print(f"{label}: ok: {name}: {what}, {len(used)} distinct metrics, all in the catalog")
    unused = sorted(set(catalog) - used_everywhere(options, catalog))
    if unused:
        print(f"catalog: not on the dashboard nor in an alert: {', '.join(unused)}")
    return 1 if failed else 0


def used_everywhere(options, catalog):
    """Catalogued metrics that the dashboard or an alert uses (for the information line)."""
    text = open(options.dashboard, encoding="utf-8").read() + open(options.alerts, encoding="utf-8").read()
    used = set()
    for raw in NAME.findall(text):
        for candidate in (raw, *(raw[: -len(s)] for s in HISTOGRAM_SUFFIXES if raw.endswith(s))):
            if candidate in catalog:
                used.add(candidate)
    return used


if __name__ == "__main__":
    sys.exit(main())
