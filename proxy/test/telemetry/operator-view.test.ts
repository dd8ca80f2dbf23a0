import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { ALERTS, alertExpr } from '../../src/telemetry/operator-view/alerts.js';
import { DASHBOARD_ROWS } from '../../src/telemetry/operator-view/dashboard.js';
import { driftedFiles, GENERATED_FILES } from '../../src/telemetry/operator-view/generate.js';
import { grafanaDashboard } from '../../src/telemetry/operator-view/grafana.js';
import { metricsIn } from '../../src/telemetry/operator-view/model.js';
import {
  EXTERNAL_METRICS,
  OPTIONAL_METRICS,
  PENDING_METRICS,
} from '../../src/telemetry/operator-view/pending-metrics.js';

const repoRoot = fileURLToPath(new URL('../../..', import.meta.url));
const dashboardFile = path.join(repoRoot, GENERATED_FILES.dashboard[0]);
const rulesFile = path.join(repoRoot, GENERATED_FILES.rules[0]);

/**
 * Compiles `json` as a TypeScript object literal typed with Grafana's published dashboard and
 * panel-options types (@grafana/schema), with each panel typed by its kind: the compiler rejects
 * any property the schema does not declare (excess property check at every depth), a missing
 * required one, and a value of the wrong type. Enum-typed fields take the enums' string values,
 * as the JSON model stores them.
 */
function schemaErrors(json: unknown): string[] {
  const source = `
import type { Dashboard, FieldConfigSource, Panel, RowPanel } from '@grafana/schema';
import type { Options as StatOptions } from '@grafana/schema/dist/esm/raw/composable/stat/panelcfg/x/StatPanelCfg_types.gen';
import type { FieldConfig as TimeSeriesFieldConfig, Options as TimeSeriesOptions } from '@grafana/schema/dist/esm/raw/composable/timeseries/panelcfg/x/TimeSeriesPanelCfg_types.gen';
type Json<T> = T extends string ? \`\${T}\` : T extends number | boolean | null | undefined ? T : T extends object ? { [K in keyof T]: Json<T[K]> } : T;
type Defaults<C> = Omit<FieldConfigSource['defaults'], 'custom'> & { custom?: C };
type TimeSeriesPanel = Omit<Panel, 'options' | 'fieldConfig' | 'type'> & { type: 'timeseries'; options: TimeSeriesOptions; fieldConfig: Omit<FieldConfigSource, 'defaults'> & { defaults: Defaults<TimeSeriesFieldConfig> } };
type StatPanel = Omit<Panel, 'options' | 'type'> & { type: 'stat'; options: StatOptions };
type Row = Omit<RowPanel, 'type'> & { type: 'row' };
type Checked = Json<Omit<Dashboard, 'panels'> & { panels: Array<TimeSeriesPanel | StatPanel | Row> }>;
export const dashboard: Checked = ${JSON.stringify(json, null, 1)};
`;
  const fileName = path.join(repoRoot, 'proxy/test/telemetry/__dashboard__.ts');
  const options: ts.CompilerOptions = {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: [],
  };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (name, version, ...rest) =>
    name === fileName ? ts.createSourceFile(name, source, version) : getSourceFile(name, version, ...rest);
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (name) => name === fileName || fileExists(name);
  const program = ts.createProgram([fileName], options, host);
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const message = ts.flattenDiagnosticMessageText(d.messageText, '\n');
    if (!d.file || d.start === undefined) return message;
    const { line } = d.file.getLineAndCharacterOfPosition(d.start);
    return `line ${line + 1} (${d.file.text.split('\n')[line]?.trim()}): ${message}`;
  });
}

interface JsonPanel {
  id: number;
  type: string;
  title: string;
  gridPos: { x: number; y: number; w: number; h: number };
  datasource?: { uid: string };
  targets?: Array<{ refId: string; expr: string; datasource: { uid: string } }>;
}

function promtool(args: string[]): string {
  try {
    return execFileSync('promtool', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (error) {
    const e = error as { stdout?: string; stderr?: string; message: string };
    throw new Error(`promtool ${args.join(' ')}:\n${e.stdout ?? ''}${e.stderr ?? ''}${e.message}`);
  }
}

function hasPromtool(): boolean {
  try {
    execFileSync('promtool', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** The instrument names of ../../src/telemetry/metrics.ts, liveness.ts and replication-health.ts, in their Prometheus spelling. */
function declaredMetrics(): Set<string> {
  const text = ['metrics.ts', 'liveness.ts', 'replication-health.ts']
    .map((file) => readFileSync(path.join(repoRoot, 'proxy/src/telemetry', file), 'utf8'))
    .join('\n');
  return new Set([...text.matchAll(/'(walproxy\.[a-z0-9_.]+)'/g)].map((m) => m[1]!.replaceAll('.', '_')));
}

const baseName = (name: string) => name.replace(/_(total|bucket|count|sum)$/, '');

describe('the operator view (dashboard and alert rules)', () => {
  it('is generated: the committed dashboard and rules files match their declarations', () => {
    // When this fails, run `make docs` and commit the files it writes.
    expect(driftedFiles()).toEqual([]);
  });

  it('validates the dashboard JSON against Grafana’s dashboard schema types', () => {
    const json = JSON.parse(readFileSync(dashboardFile, 'utf8'));
    expect(schemaErrors(json)).toEqual([]);
  });

  it('fails the schema check for a field Grafana does not declare, and for a value of the wrong type', () => {
    const unknownField = grafanaDashboard() as unknown as { panels: Array<Record<string, unknown>> };
    unknownField.panels[1]!.yAxis = 'left';
    expect(schemaErrors(unknownField).join('\n')).toMatch(/known properties, and '"yAxis"' does not exist/);
    const wrongType = grafanaDashboard() as unknown as { refresh: unknown };
    wrongType.refresh = 30;
    expect(schemaErrors(wrongType).join('\n')).toMatch(/'number' is not assignable to type 'string/);
  });

  it('lays the panels out on Grafana’s 24-column grid without overlaps, with unique ids and declared variables', () => {
    const json = JSON.parse(readFileSync(dashboardFile, 'utf8')) as {
      panels: JsonPanel[];
      templating: { list: Array<{ name: string }> };
    };
    const ids = json.panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    const cells = new Set<string>();
    for (const p of json.panels) {
      const { x, y, w, h } = p.gridPos;
      expect(x + w, p.title).toBeLessThanOrEqual(24);
      for (let i = x; i < x + w; i++)
        for (let j = y; j < y + h; j++) {
          expect(cells.has(`${i},${j}`), `${p.title} overlaps at ${i},${j}`).toBe(false);
          cells.add(`${i},${j}`);
        }
    }
    const variables = new Set(json.templating.list.map((v) => v.name));
    for (const p of json.panels.filter((p) => p.type !== 'row')) {
      expect(p.targets?.length, p.title).toBeGreaterThan(0);
      for (const t of p.targets!) {
        // biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's variable syntax
        expect(t.datasource.uid).toBe('${datasource}');
        for (const [, name] of t.expr.matchAll(/\$(\w+)/g)) {
          if (name!.startsWith('__')) continue;
          expect(variables, `${p.title}: $${name}`).toContain(name);
        }
      }
    }
  });

  it('reads only metrics walproxy declares, or the listed pending and external ones', () => {
    const declared = declaredMetrics();
    const queries = [
      ...DASHBOARD_ROWS.flatMap((r) => r.panels.flatMap((p) => p.queries.map((q) => q.expr))),
      ...ALERTS.map((a) => alertExpr(a)),
    ];
    const referenced = new Set(queries.flatMap(metricsIn));
    for (const name of referenced) {
      if (name in PENDING_METRICS || name in EXTERNAL_METRICS) continue;
      expect(declared, `${name}: not in metrics.ts, PENDING_METRICS or EXTERNAL_METRICS`).toContain(
        baseName(name),
      );
    }
    // An optional metric is one a sidecar exports where configured for it: walproxy declares it.
    for (const name of Object.keys(OPTIONAL_METRICS)) expect(declared, name).toContain(baseName(name));
    // A pending metric that now exists, or that no query reads any more, is removed from the list.
    for (const name of Object.keys(PENDING_METRICS)) {
      expect(declared.has(baseName(name)), `${name} exists now: remove it from PENDING_METRICS`).toBe(false);
      expect(referenced, `${name} is read by no query`).toContain(name);
    }
  });

  describe.skipIf(!hasPromtool())(
    'with promtool (skipped only where it is missing: `make test-unit` installs the Debian package prometheus)',
    () => {
      it('passes `promtool check rules`', () => {
        expect(promtool(['check', 'rules', rulesFile])).toMatch(
          new RegExp(`SUCCESS: ${ALERTS.length} rules found`),
        );
      });
      // Each rule firing on its fault and silent on healthy series: alert-rules.test.ts.
    },
  );
});
