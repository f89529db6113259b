// Offline schema check of Kubernetes manifests: every document of every
// file given is parsed as YAML 1.1 (what the Kubernetes API reads: 0440 is
// an octal number there) and validated against the OpenAPI schema of its
// apiVersion and kind that the npm package kubernetes-models bundles. A
// kind without a schema here is an error, not a pass. A Kustomization must
// list exactly the other manifests of its directory, but for those that
// hold only kinds of a CRD that a cluster may lack (the Prometheus
// Operator's PrometheusRule: applied on its own, deploy/k8s/README.md).
//
// The schemas check types, enums, formats and required fields; like the
// API server's non-strict mode they accept unknown fields, so
// tests/deploy/check-k8s-args checks the fields that matter by name.
//
//   node validate-k8s.mjs FILE.yaml...     exit 0 if all valid, 1 if not
//   node validate-k8s.mjs -                the documents on stdin
import { readFileSync, readdirSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { parseAllDocuments } from "yaml";
import { StatefulSet } from "kubernetes-models/apps/v1/StatefulSet";
import { NetworkPolicy } from "kubernetes-models/networking.k8s.io/v1/NetworkPolicy";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1/PodDisruptionBudget";
import { Secret } from "kubernetes-models/v1/Secret";
import { Service } from "kubernetes-models/v1/Service";
import { PrometheusRule } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule";

const models = {
  "apps/v1 StatefulSet": StatefulSet,
  "networking.k8s.io/v1 NetworkPolicy": NetworkPolicy,
  "policy/v1 PodDisruptionBudget": PodDisruptionBudget,
  "v1 Secret": Secret,
  "v1 Service": Service,
  "monitoring.coreos.com/v1 PrometheusRule": PrometheusRule,
};

// Kinds of a CRD: a file holding only these may stay out of a Kustomization.
const crdKinds = new Set(["monitoring.coreos.com/v1 PrometheusRule"]);

function onlyCrdKinds(path) {
  const docs = parseAllDocuments(readFileSync(path, "utf8"), { version: "1.1" });
  return docs.length > 0 && docs.every((d) => {
    const o = d.toJS();
    return o && crdKinds.has(`${o.apiVersion} ${o.kind}`);
  });
}

// The other *.yaml files of a Kustomization's directory must be its resources.
function checkKustomization(file, obj) {
  if (file === "-") return [];
  const listed = [...(obj.resources ?? [])].sort();
  const present = readdirSync(dirname(file))
    .filter((n) => n.endsWith(".yaml") && n !== basename(file))
    .filter((n) => listed.includes(n) || !onlyCrdKinds(join(dirname(file), n)))
    .sort();
  if (JSON.stringify(listed) === JSON.stringify(present)) return [];
  return [`resources ${JSON.stringify(listed)} but the directory has ${JSON.stringify(present)}`];
}

// The problems of one document, as one line each.
function checkDocument(file, obj) {
  if (obj === null || typeof obj !== "object" || Array.isArray(obj))
    return ["not a mapping (an empty document?)"];
  const key = `${obj.apiVersion} ${obj.kind}`;
  if (key === "kustomize.config.k8s.io/v1beta1 Kustomization") return checkKustomization(file, obj);
  const Model = models[key];
  if (!Model) return [`no schema for apiVersion ${obj.apiVersion}, kind ${obj.kind}`];
  if (!obj.metadata?.name) return [`${obj.kind} without metadata.name`];
  try {
    new Model(obj).validate();
    return [];
  } catch (e) {
    return [`${obj.kind} ${obj.metadata.name}: ${e.message}`];
  }
}

function checkFile(file) {
  const text = readFileSync(file === "-" ? 0 : file, "utf8");
  const docs = parseAllDocuments(text, { version: "1.1", prettyErrors: true });
  const problems = [];
  let count = 0;
  for (const doc of docs) {
    count++;
    const errors = [...doc.errors, ...doc.warnings].map((e) => `YAML: ${e.message}`);
    problems.push(...(errors.length ? errors : checkDocument(file, doc.toJS())));
  }
  if (count === 0) problems.push("no document");
  return { count, problems };
}

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: node validate-k8s.mjs FILE.yaml... (or - for stdin)");
  process.exit(2);
}
let failed = 0;
for (const file of files) {
  const { count, problems } = checkFile(file);
  for (const p of problems) console.error(`${file}: ${p}`);
  if (problems.length) failed++;
  else console.log(`${file}: ${count} document(s) valid`);
}
process.exit(failed ? 1 : 0);
