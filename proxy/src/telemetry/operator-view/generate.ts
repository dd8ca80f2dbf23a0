// Writes the operator's view from its declarations (dashboard.ts, alerts.ts):
//   node proxy/dist/telemetry/operator-view/generate.js           writes the files below (`make docs`)
//   node proxy/dist/telemetry/operator-view/generate.js --check   exits 1 when one differs
// deploy/observability/ holds the files an operator imports by hand; the Helm chart ships the same
// two under files/ (a chart can read only files inside it). A unit test fails when any drifts.
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { grafanaDashboard } from './grafana.js';
import { prometheusRulesYaml } from './prometheus-rules.js';

const repo = (path: string) => fileURLToPath(new URL(`../../../../${path}`, import.meta.url));

export const GENERATED_FILES = {
  dashboard: [
    'deploy/observability/walproxy-dashboard.json',
    'deploy/helm/walproxy/files/grafana-dashboard.json',
  ],
  rules: ['deploy/observability/walproxy-alerts.yaml', 'deploy/helm/walproxy/files/prometheus-rules.yaml'],
} as const;

/** Repository-relative path → content, as the generator writes them. */
export function generatedFiles(): Map<string, string> {
  const dashboard = `${JSON.stringify(grafanaDashboard(), null, 2)}\n`;
  const rules = `# Generated from proxy/src/telemetry/operator-view/alerts.ts (make docs); do not edit.\n${prometheusRulesYaml()}`;
  const files = new Map<string, string>();
  for (const path of GENERATED_FILES.dashboard) files.set(path, dashboard);
  for (const path of GENERATED_FILES.rules) files.set(path, rules);
  return files;
}

/** Files whose committed content differs from what the declarations generate. */
export function driftedFiles(): string[] {
  const drifted: string[] = [];
  for (const [path, content] of generatedFiles()) {
    let current: string | undefined;
    try {
      current = readFileSync(repo(path), 'utf8');
    } catch {
      current = undefined;
    }
    if (current !== content) drifted.push(path);
  }
  return drifted;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.argv.includes('--check')) {
    const drifted = driftedFiles();
    if (drifted.length > 0) {
      console.error(`out of date (run \`make docs\`): ${drifted.join(', ')}`);
      process.exit(1);
    }
  } else {
    for (const [path, content] of generatedFiles()) writeFileSync(repo(path), content);
  }
}
