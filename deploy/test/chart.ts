import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { parseAllDocuments } from 'yaml';
import yargs from 'yargs';
import { sidecarOptions } from '../../proxy/src/cli/sidecar-command.js';
import { parseSidecarConfig } from '../../proxy/src/config/sidecar-config.js';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const chartDir = path.join(repoRoot, 'deploy/helm/walproxy');
/** The Kubernetes version the chart is rendered and linted for (Chart.yaml asks for >= 1.29). */
export const KUBE_VERSION = '1.31.0';

/** helm: $WALPROXY_HELM, else .cache/bin/helm (`make helm`), else helm on PATH. */
export function helmBinary(): string {
  const candidates = [process.env.WALPROXY_HELM, path.join(repoRoot, '.cache/bin/helm')];
  for (const candidate of candidates) if (candidate && existsSync(candidate)) return candidate;
  try {
    execFileSync('helm', ['version'], { stdio: 'ignore' });
    return 'helm';
  } catch {
    throw new Error('helm not found: run `make helm` (builds the pinned helm into .cache/bin)');
  }
}

export function helm(args: string[]): string {
  try {
    return execFileSync(helmBinary(), args, {
      cwd: repoRoot,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (error) {
    const e = error as { stderr?: string; stdout?: string; message: string };
    throw new Error(`helm ${args.join(' ')} failed:\n${e.stderr ?? ''}${e.stdout ?? ''}${e.message}`);
  }
}

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  // biome-ignore lint/suspicious/noExplicitAny: rendered manifests are checked against the schemas separately
  [key: string]: any;
}

export interface RenderOptions {
  release?: string;
  namespace?: string;
  valuesFiles?: string[];
  set?: string[];
}

/** `helm template` of the chart, parsed into objects. */
export function renderChart(options: RenderOptions = {}): K8sObject[] {
  const args = [
    'template',
    options.release ?? 'kafka',
    chartDir,
    '--namespace',
    options.namespace ?? 'streaming',
    '--kube-version',
    KUBE_VERSION,
  ];
  for (const file of options.valuesFiles ?? []) args.push('-f', path.resolve(chartDir, file));
  for (const value of options.set ?? []) args.push('--set', value);
  return parseManifests(helm(args));
}

export function parseManifests(text: string): K8sObject[] {
  const objects: K8sObject[] = [];
  for (const doc of parseAllDocuments(text)) {
    if (doc.errors.length > 0) throw new Error(`YAML error: ${doc.errors.map((e) => e.message).join('; ')}`);
    const value = doc.toJS();
    if (value !== null && value !== undefined) objects.push(value as K8sObject);
  }
  return objects;
}

export function find(objects: K8sObject[], kind: string, name: string): K8sObject {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (!found) {
    const names = objects.map((o) => `${o.kind}/${o.metadata.name}`).join(', ');
    throw new Error(`${kind}/${name} not rendered; got ${names}`);
  }
  return found;
}

/**
 * `apps/v1` + `StatefulSet` → the kubernetes-models module path (`v1` is the core group); the
 * prometheus-operator kinds (PrometheusRule) come from @kubernetes-models/prometheus-operator.
 */
function modelModule(object: K8sObject): string {
  const models = object.apiVersion.startsWith('monitoring.coreos.com/')
    ? '@kubernetes-models/prometheus-operator'
    : 'kubernetes-models';
  return `${models}/${object.apiVersion}/${object.kind}`;
}

/**
 * Validates each object against the Kubernetes OpenAPI schema, offline, with kubernetes-models
 * (required fields, types, formats, enums). Returns one line per problem.
 */
export async function schemaErrors(objects: K8sObject[]): Promise<string[]> {
  const errors: string[] = [];
  for (const object of objects) {
    const where = `${object.kind}/${object.metadata?.name}`;
    let Model: new (data: unknown) => { validate(): void };
    try {
      const module = (await import(modelModule(object))) as Record<string, typeof Model>;
      Model = module[object.kind]!;
    } catch (error) {
      errors.push(`${where}: no schema for ${object.apiVersion} ${object.kind}: ${(error as Error).message}`);
      continue;
    }
    try {
      new Model(object).validate();
    } catch (error) {
      errors.push(`${where}: ${(error as Error).message}`);
    }
  }
  return errors;
}

/**
 * The schemas kubernetes-models validates with allow unknown properties, so a misspelled field
 * would pass. This compiles every object as a TypeScript object literal typed with the model's
 * interface: the compiler rejects any property the API type does not declare (excess property
 * check, at every depth) and any value of the wrong type.
 */
export function unknownFieldErrors(objects: K8sObject[]): string[] {
  const imports = new Map<string, string>();
  const lines: string[] = [];
  objects.forEach((object, i) => {
    const module = modelModule(object);
    if (!imports.has(module)) imports.set(module, `T${imports.size}`);
    lines.push(`// ${object.kind}/${object.metadata?.name}`);
    lines.push(
      `export const o${i}: I${object.kind}_${imports.get(module)} = ${JSON.stringify(object, null, 1)};`,
    );
  });
  const header = [...imports].map(([module, alias]) => {
    const kind = module.slice(module.lastIndexOf('/') + 1);
    return `import type { I${kind} as I${kind}_${alias} } from '${module}';`;
  });
  const source = [...header, ...lines].join('\n');
  const fileName = path.join(repoRoot, 'deploy/test/__rendered-objects__.ts');
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
  const diagnostics = ts.getPreEmitDiagnostics(program);
  return diagnostics.map((d) => {
    const message = ts.flattenDiagnosticMessageText(d.messageText, '\n');
    if (!d.file || d.start === undefined) return message;
    const { line } = d.file.getLineAndCharacterOfPosition(d.start);
    const text = d.file.text.split('\n');
    // The object this line belongs to: the nearest `// Kind/name` comment above it.
    let owner = '';
    for (let l = line; l >= 0 && !owner; l--) if (text[l]!.startsWith('// ')) owner = text[l]!.slice(3);
    return `${owner}: ${message}`;
  });
}

/** Parses argv exactly as `walproxy sidecar` does (yargs options, then the config validation). */
export async function parseLikeWalproxy(argv: string[]): Promise<string[]> {
  let raw: Record<string, unknown> = {};
  await yargs(argv)
    .command('sidecar', '', sidecarOptions, (a) => {
      raw = a;
    })
    .strict()
    .fail((message, error) => {
      throw new Error(message ?? error?.message);
    })
    .parseAsync();
  const parsed = parseSidecarConfig(raw);
  return 'errors' in parsed ? parsed.errors : [];
}

/** A Kubernetes memory quantity in bytes (the suffixes a container limit uses). */
export function parseQuantity(quantity: string | number): number {
  const match = /^(\d+)(Ki|Mi|Gi|Ti|k|M|G|T)?$/.exec(String(quantity));
  if (!match) throw new Error(`not a memory quantity: ${quantity}`);
  const unit = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, k: 1e3, M: 1e6, G: 1e9, T: 1e12 };
  return Number(match[1]) * (match[2] ? unit[match[2] as keyof typeof unit] : 1);
}
